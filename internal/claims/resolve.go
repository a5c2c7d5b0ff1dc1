package claims

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// planned is one allocated device: what the CDI spec gets, and for a
// dynamic placement what prepare carves first.
type planned struct {
	dev   cdi.ClaimDevice
	carve *publish.Carve
	// share is set when the claim got part of a multi-allocatable device
	// (capacity.go; dev.ShareID is the allocation's), shared is what the
	// device offers all its shares.
	share  *sharing.Share
	shared *publish.SharedCapacity
	// passthrough: the device was allocated through the vfio class, to be
	// passed through to a virtual machine (effect_vfio.go).
	passthrough bool
	// dev.AdminAccess: the device was allocated for admin access, to be
	// watched and not held (admin.go).
	// attrs are its attributes as published (read only): its metadata's
	// start (metadata.go).
	attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
}

func cdiDevices(ps []planned) []cdi.ClaimDevice {
	out := make([]cdi.ClaimDevice, len(ps))
	for i, p := range ps {
		out[i] = p.dev
	}
	return out
}

// resolve maps the claim's allocation results for this driver to inventory
// devices. Any device this node does not publish fails the claim, naming it.
func (m *Manager) resolve(claim *resourceapi.ResourceClaim) ([]planned, error) {
	if claim.Status.Allocation == nil {
		return nil, ErrNotAllocated
	}
	pub := m.cfg.Devices()
	var out []planned
	var missing []string
	var refused []error
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != m.cfg.DriverName {
			continue
		}
		e, ok := pub.Devices[r.Device]
		if !ok {
			// A placement left out now (partitions block it, or its GPU
			// is outside the window): what holds its room decides
			// (checkConflicts), as when it was published.
			e, ok = pub.LeftOut[r.Device]
		}
		if r.Pool != pub.Pool || !ok {
			missing = append(missing, fmt.Sprintf("%s/%s (request %q)", r.Pool, r.Device, r.Request))
			continue
		}
		p := planned{dev: cdi.ClaimDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, GPU: *e.GPU, Partition: e.Partition}, carve: e.Carve, shared: e.Shared,
			passthrough: requestClass(claim, r.Request) == names.VFIOClass, attrs: e.Attributes}
		if r.ShareID != nil {
			p.dev.ShareID = string(*r.ShareID)
			p.share = shareOf(p.dev.ShareID, r.ConsumedCapacity, e)
		}
		if adminResult(r) {
			p.dev.AdminAccess = true
			if err := watch(&p, e); err != nil {
				refused = append(refused, err)
			}
			out = append(out, p)
			continue
		}
		if e.Carve != nil {
			// Whatever is published at the placement now is not this
			// claim's: prepare carves its own.
			p.dev.Partition = nil
		}
		out = append(out, p)
	}
	if len(missing) > 0 {
		return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("allocated device(s) not on this node (pool %s): %s", pub.Pool, strings.Join(missing, ", ")))
	}
	if err := errors.Join(refused...); err != nil {
		return nil, err
	}
	if err := m.checkAdmin(claim, out); err != nil {
		return nil, err
	}
	// An admin-access device gets no settings: checkAdmin refused every
	// config that would apply to it.
	hold := holdingOnly(out)
	if err := m.resolveSharing(claim, hold); err != nil {
		return nil, withKind(ErrConfigRejected, err)
	}
	if len(hold) < len(out) {
		k := 0
		for i := range out {
			if !out[i].dev.AdminAccess {
				out[i] = hold[k]
				k++
			}
		}
	}
	return out, nil
}

// requestClass is the DeviceClass of the claim's request (or subrequest,
// "req/sub") of an allocation result; "" when the spec does not name it.
func requestClass(claim *resourceapi.ResourceClaim, request string) string {
	name, sub, _ := strings.Cut(request, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != name {
			continue
		}
		if r.Exactly != nil && sub == "" {
			return r.Exactly.DeviceClassName
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return ""
}

// resolveRecorded maps a checkpointed claim's devices back to the inventory.
func (m *Manager) resolveRecorded(c *checkpoint.Claim) ([]cdi.ClaimDevice, error) {
	pub := m.cfg.Devices()
	out := make([]cdi.ClaimDevice, 0, len(c.Devices))
	for _, d := range c.Devices {
		e, ok := pub.Devices[d.Device]
		if !ok && d.VFIO != nil {
			e, ok = pub.Passed[d.Device] // published as passed, no device
		}
		if !ok || d.Pool != pub.Pool {
			return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("prepared device %s/%s is no longer on this node", d.Pool, d.Device))
		}
		if d.PartitionUUID != "" && (e.Partition == nil || e.Partition.UUID != d.PartitionUUID) {
			return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("prepared device %s/%s: partition %s is gone", d.Pool, d.Device, d.PartitionUUID))
		}
		out = append(out, cdi.ClaimDevice{Request: d.Request, Pool: d.Pool, Device: d.Device, GPU: *e.GPU, Partition: e.Partition, Sharing: d.Sharing, ShareID: d.ShareID, NCCLTopoFile: d.NCCLTopoFile, VFIO: d.VFIO, AdminAccess: d.AdminAccess})
	}
	return out, nil
}

// checkConflicts is the driver's last line of defence against handing one
// device to two claims: a GPU and anything on it, one partition, or two
// overlapping placements may belong to only one prepared claim; nor may a
// GPU of modes be another claim's in a mode other than the one a device
// needs (modes.go). Each refusal goes the same way: its holders are the
// suspects the stale-claim release asks the API server about (stale.go).
func (m *Manager) checkConflicts(ctx context.Context, ref cdi.ClaimRef, devs []planned) error {
	type held struct {
		fp     footprint
		uid    string
		owner  string
		device string
	}
	var holds []held
	// In UID order, so that a refusal names the same holder every time.
	for _, uid := range slices.Sorted(maps.Keys(m.cp.Claims)) {
		c := m.cp.Claims[uid]
		if uid == ref.UID {
			continue
		}
		for _, d := range c.Devices {
			if holding(d) {
				holds = append(holds, held{recordedFootprint(d), uid, c.Namespace + "/" + c.Name, d.Device})
			}
		}
	}
	var conflicts []string
	for _, d := range devs {
		fp := plannedFootprint(d)
		for _, h := range holds {
			if !fp.conflicts(h.fp) {
				continue
			}
			if fp.overlaps(h.fp) {
				conflicts = append(conflicts, fmt.Sprintf("device %s is in use by another prepared claim (its device %s)", d.dev.Device, h.device))
			} else {
				conflicts = append(conflicts, fmt.Sprintf("device %s: %v", d.dev.Device, modeRefusal(fp.gpu, h.fp.mode, h.uid, fp.mode)))
			}
			klog.FromContext(ctx).Info("Refusing a device another prepared claim holds", "claim", ref.Namespace+"/"+ref.Name, "device", d.dev.Device, "heldBy", h.owner, "heldDevice", h.device)
			break
		}
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return withKind(ErrDeviceInUse, errors.New(strings.Join(conflicts, "; ")))
	}
	return nil
}

// footprint is what a device occupies on its GPU.
type footprint struct {
	gpu       string
	whole     bool
	partition string // UUID, when known
	slots     uint64 // memory slices of a dynamic placement
	// share: a capacity share, which other shares of the same device may
	// sit beside (their sum is checkShares').
	share bool
	// mode: the partition mode a placement needs its GPU in. Set for a
	// planned placement on a GPU of modes, and for every recorded
	// placement (a MIG profile is only ever compared with a planned
	// device's mode on the same GPU, which a MIG GPU's never has).
	mode string
}

// conflicts reports whether a and b cannot be held by two claims at once:
// they overlap, or they need their GPU in two modes.
func (a footprint) conflicts(b footprint) bool {
	return a.overlaps(b) || (a.gpu == b.gpu && a.mode != "" && b.mode != "" && a.mode != b.mode)
}

func (a footprint) overlaps(b footprint) bool {
	if a.gpu != b.gpu {
		return false
	}
	if a.share && b.share && a.partition == b.partition {
		return false
	}
	return a.whole || b.whole || (a.partition != "" && a.partition == b.partition) || a.slots&b.slots != 0
}

func slotMask(p inventory.Placement) uint64 { return (uint64(1)<<p.Size - 1) << p.Start }

func recordedFootprint(d checkpoint.Device) footprint {
	fp := footprint{gpu: d.GPUUUID, partition: d.PartitionUUID, share: d.Sharing.IsShare()}
	if d.Placement != nil {
		fp.slots = slotMask(*d.Placement)
		fp.mode = d.Profile
	}
	fp.whole = fp.partition == "" && fp.slots == 0
	return fp
}

func plannedFootprint(d planned) footprint {
	fp := footprint{gpu: d.dev.GPU.UUID, share: d.share != nil}
	switch {
	case d.carve != nil:
		fp.slots = slotMask(d.carve.Placement)
		if publish.IsModal(&d.dev.GPU) {
			fp.mode = d.carve.Profile
		}
	case d.dev.Partition != nil:
		fp.partition = d.dev.Partition.UUID
	default:
		fp.whole = true
	}
	return fp
}

// wantsTopology reports whether a recorded claim has an NCCL topology file.
func wantsTopology(c *checkpoint.Claim) bool {
	return slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return d.NCCLTopoFile })
}

func specExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
