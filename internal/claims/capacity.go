package claims

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// Capacity shares (--sharing=capacity): the scheduler allocates parts of a
// multi-allocatable device to several claims, each with a ShareID and the
// capacity it consumed. A claim whose share is the device's whole memory
// has the device to itself and is prepared as before; any other is a
// share: recorded with its consumption, run under the device's shared MPS
// daemon on NVIDIA (effect_mps.go), and checked here against the shares other
// prepared claims hold, so a scheduler bug that over-commits a device
// fails the claim instead of over-committing the GPU.

// shareOf is the share an allocation result with shareID consumed, nil
// when it consumed the device's whole memory (or did not say).
func shareOf(shareID string, consumed map[resourceapi.QualifiedName]resource.Quantity, e publish.Entry) *sharing.Share {
	mem, ok := consumed[publish.CapMemory]
	if !ok || mem.Value() >= sharedMemory(e) {
		return nil
	}
	sh := &sharing.Share{ID: shareID, MemoryBytes: mem.Value()}
	if cu, ok := consumed[publish.CapComputeUnits]; ok {
		sh.ComputeUnits = cu.Value()
	}
	return sh
}

// sharedMemory is what a device offers its shares: what was published, or
// for a device no longer published shareable, its memory.
func sharedMemory(e publish.Entry) int64 {
	switch {
	case e.Shared != nil:
		return e.Shared.MemoryBytes
	case e.Partition != nil:
		return e.Partition.MemoryBytes
	}
	return e.GPU.MemoryBytes
}

// checkShares refuses shares that, with those other prepared claims hold
// on the same device, would consume more than the device offers.
func (m *Manager) checkShares(ctx context.Context, uid string, devs []planned) error {
	key := func(gpu, partition, device string) string { return gpu + "/" + partition + "/" + device }
	held := map[string]*use{}
	for _, c := range sortedClaims(m.cp) {
		if c.UID == uid {
			continue
		}
		for _, d := range c.Devices {
			if !d.Sharing.IsShare() {
				continue
			}
			k := key(d.GPUUUID, d.PartitionUUID, d.Device)
			u := held[k]
			if u == nil {
				u = &use{}
				held[k] = u
			}
			u.mem += d.Sharing.Share.MemoryBytes
			u.cu += d.Sharing.Share.ComputeUnits
			u.holders = append(u.holders, c.Namespace+"/"+c.Name)
		}
	}
	var errs []string
	mine := map[string]*use{}
	for _, d := range devs {
		if d.share == nil {
			continue
		}
		partition := ""
		if d.dev.Partition != nil {
			partition = d.dev.Partition.UUID
		}
		k := key(d.dev.GPU.UUID, partition, d.dev.Device)
		u := mine[k]
		if u == nil {
			u = &use{}
			if h := held[k]; h != nil {
				*u = *h
			}
			mine[k] = u
		}
		u.mem += d.share.MemoryBytes
		u.cu += d.share.ComputeUnits
		offered := &publish.SharedCapacity{MemoryBytes: sharedMemory(publish.Entry{GPU: &d.dev.GPU, Partition: d.dev.Partition, Shared: d.shared})}
		if d.shared != nil {
			offered.ComputeUnits = d.shared.ComputeUnits
		}
		if u.mem > offered.MemoryBytes || (offered.ComputeUnits > 0 && u.cu > offered.ComputeUnits) {
			others := holders(held[k])
			errs = append(errs, fmt.Sprintf("device %s: share %s (%s) with the shares %d other prepared claims hold consumes %s of memory and %d compute units, more than the device's %s and %d",
				d.dev.Device, d.share.ID, d.share, len(others), bin(u.mem), u.cu, bin(offered.MemoryBytes), offered.ComputeUnits))
			klog.FromContext(ctx).Info("Refusing a share the device has no room for", "device", d.dev.Device, "share", d.share.ID, "heldBy", others)
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return withKind(ErrDeviceInUse, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

// logShares says once per prepared claim which of its capacity shares
// nothing enforces.
func logShares(logger klog.Logger, devs []planned) {
	for _, d := range devs {
		if s := d.dev.Sharing; s.IsShare() && !s.Share.Enforced {
			logger.Info("Capacity share is accounted by the scheduler only: this GPU cannot enforce it", "device", d.dev.Device, "share", s.Share.ID, "consumed", s.Share.String(), "vendor", d.dev.GPU.Vendor)
		}
	}
}

// use is what the shares of one device consume, and whose they are.
type use struct {
	mem, cu int64
	holders []string
}

func holders(u *use) []string {
	if u == nil {
		return nil
	}
	return u.holders
}

func bin(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }

// DeviceUse is what prepared claims hold of one multi-allocatable device.
type DeviceUse struct {
	MemoryBytes, ComputeUnits int64
	Shares                    int
	// Whole: a claim holds the device's whole memory (it asked no capacity).
	Whole bool
}

// SharedUse returns, by device name, what prepared claims hold of devices
// they got with a ShareID, for the metrics.
func (m *Manager) SharedUse() map[string]DeviceUse {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]DeviceUse{}
	for _, c := range m.cp.Claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, d := range c.Devices {
			if d.ShareID == "" || !holding(d) {
				continue
			}
			u := out[d.Device]
			if d.Sharing.IsShare() {
				u.MemoryBytes += d.Sharing.Share.MemoryBytes
				u.ComputeUnits += d.Sharing.Share.ComputeUnits
				u.Shares++
			} else {
				u.Whole = true
			}
			out[d.Device] = u
		}
	}
	return out
}
