package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// intervals is the time-slice interval effect: a device whose claim's
// config asks an interval sets it on its GPU. A GPU's interval is one
// setting: a claim asking a different one than a prepared claim holds on
// that GPU is refused, and the GPU gets the default back once no claim
// holds one on it. Only a reboot resets an interval, so it is set again at
// start, not by the periodic check.
type intervals struct{ nothing }

func (intervals) plan(_ *Manager, d *planned, _ *checkpoint.Device) bool {
	_, ok := d.dev.Sharing.Interval()
	return ok
}

func (intervals) holds(d checkpoint.Device) bool {
	_, ok := d.Sharing.Interval()
	return ok
}

func (intervals) check(ctx context.Context, m *Manager, uid string, devs []planned) error {
	return m.checkIntervals(ctx, uid, devs)
}

func (intervals) apply(ctx context.Context, m *Manager, _ *checkpoint.Claim, devs []planned) error {
	for _, d := range devs {
		if ts, ok := d.dev.Sharing.Interval(); ok {
			if err := m.cfg.Backend.SetTimeSlice(ctx, d.dev.GPU.UUID, ts); err != nil {
				return withKind(ErrSharing, fmt.Errorf("device %s: set time-slice interval %s: %w", d.dev.Device, ts, err))
			}
		}
	}
	return nil
}

func (intervals) undo(ctx context.Context, m *Manager, c *checkpoint.Claim) error {
	return m.restoreIntervals(ctx, c)
}

func (intervals) ensure(ctx context.Context, m *Manager, r *recorded, occ occasion) (int, error) {
	if occ != atStart {
		return 0, nil
	}
	var errs []error
	for _, d := range r.c.Devices {
		if ts, ok := d.Sharing.Interval(); ok {
			if err := m.cfg.Backend.SetTimeSlice(ctx, d.GPUUUID, ts); err != nil {
				errs = append(errs, fmt.Errorf("set time-slice interval of GPU %s: %w", d.GPUUUID, err))
			}
		}
	}
	return 0, errors.Join(errs...)
}

// checkIntervals refuses a time-slice interval on a GPU where another
// prepared claim holds a different one.
func (m *Manager) checkIntervals(ctx context.Context, uid string, devs []planned) error {
	var errs []string
	for _, d := range devs {
		want, ok := d.dev.Sharing.Interval()
		if !ok {
			continue
		}
		for _, o := range sortedClaims(m.cp) {
			if o.UID == uid {
				continue
			}
			for _, od := range o.Devices {
				if have, ok := od.Sharing.Interval(); ok && od.GPUUUID == d.dev.GPU.UUID && have != want {
					errs = append(errs, fmt.Sprintf("device %s asks time-slice interval %s, but its GPU %s runs at %s for another prepared claim", d.dev.Device, want, d.dev.GPU.UUID, have))
					klog.FromContext(ctx).Info("Refusing a time-slice interval: another prepared claim holds another one on the GPU", "device", d.dev.Device, "interval", want, "heldBy", o.Namespace+"/"+o.Name, "heldInterval", have)
				}
			}
		}
	}
	if len(errs) > 0 {
		return withKind(ErrDeviceInUse, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

// restoreIntervals gives the GPUs on which c holds an interval the default
// back, unless another claim still holds one there.
func (m *Manager) restoreIntervals(ctx context.Context, c *checkpoint.Claim) error {
	for _, gpu := range heldIntervalGPUs(c) {
		if m.intervalHeldByOther(c.UID, gpu) {
			continue
		}
		if err := m.cfg.Backend.SetTimeSlice(ctx, gpu, backend.TimeSliceDefault); err != nil {
			return withKind(ErrSharing, fmt.Errorf("restore default time-slice interval of GPU %s: %w", gpu, err))
		}
		klog.FromContext(ctx).V(2).Info("Restored default time-slice interval", "gpu", gpu)
	}
	return nil
}

func heldIntervalGPUs(c *checkpoint.Claim) []string {
	var out []string
	for _, d := range c.Devices {
		if _, ok := d.Sharing.Interval(); ok && !slices.Contains(out, d.GPUUUID) {
			out = append(out, d.GPUUUID)
		}
	}
	return out
}

func (m *Manager) intervalHeldByOther(uid, gpu string) bool {
	for ouid, o := range m.cp.Claims {
		if ouid != uid && slices.Contains(heldIntervalGPUs(o), gpu) {
			return true
		}
	}
	return false
}
