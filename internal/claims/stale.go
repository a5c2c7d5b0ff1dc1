package claims

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// A prepared claim whose devices the scheduler allocated to another claim
// is released, that is unprepared, for the other claim, on evidence that
// the kubelet can no longer need it (docs/operating.md#stale-claims). The
// evidence is one of these.
type Evidence string

const (
	// EvidenceUnconfirmed: recorded before the last reboot, or rebuilt
	// from specs, and not prepared since (checkpoint.Claim's Unconfirmed).
	EvidenceUnconfirmed Evidence = "unconfirmed"
	// EvidenceDeleted: the API server has no claim of its namespace/name.
	EvidenceDeleted Evidence = "deleted"
	// EvidenceReplaced: the claim of its namespace/name has another UID.
	EvidenceReplaced Evidence = "replaced"
	// EvidenceDeallocated: the claim of its UID is allocated none of the
	// devices it holds on this node.
	EvidenceDeallocated Evidence = "deallocated"
)

// Evidences lists every Evidence (metrics start a series for each).
var Evidences = []Evidence{EvidenceUnconfirmed, EvidenceDeleted, EvidenceReplaced, EvidenceDeallocated}

// yieldUnconfirmed releases the unconfirmed claims that hold what devs
// need: the scheduler allocated those devices to ref, so such a claim is
// gone, its entry a leftover (an unprepare a power loss undid, a spec a
// corrupt checkpoint was rebuilt from). m.mu is held.
func (m *Manager) yieldUnconfirmed(ctx context.Context, ref cdi.ClaimRef, devs []planned) error {
	for _, uid := range slices.Sorted(maps.Keys(m.cp.Claims)) {
		c := m.cp.Claims[uid]
		if uid == ref.UID || !c.Unconfirmed || !holdsAnyOf(c, devs) {
			continue
		}
		if err := m.release(ctx, ref, c, EvidenceUnconfirmed); err != nil {
			return err
		}
	}
	return nil
}

// suspect is a prepared claim holding a device a refused prepare needs.
type suspect struct {
	uid string
}

// suspects are the prepared claims that hold what devs need, for
// releaseStale to ask the API server about. A claim still being prepared
// or unprepared is left alone: the kubelet is at work on it. m.mu is held.
func (m *Manager) suspects(ref cdi.ClaimRef, devs []planned) []suspect {
	var out []suspect
	for _, uid := range slices.Sorted(maps.Keys(m.cp.Claims)) {
		c := m.cp.Claims[uid]
		if uid != ref.UID && c.State == checkpoint.PrepareCompleted && holdsAnyOf(c, devs) {
			out = append(out, suspect{uid: uid})
		}
	}
	return out
}

// shareSuspects are the prepared claims holding a share of a device on
// which devs' shares do not fit beside the others: the scheduler fitted
// them, so a holder may be stale, asked about as a device's holder is.
// m.mu is held.
func (m *Manager) shareSuspects(ref cdi.ClaimRef, devs []planned) []suspect {
	var out []suspect
	for _, uid := range slices.Sorted(maps.Keys(m.cp.Claims)) {
		c := m.cp.Claims[uid]
		if uid == ref.UID || c.State != checkpoint.PrepareCompleted {
			continue
		}
		if slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool {
			return d.Sharing.IsShare() && slices.ContainsFunc(devs, func(p planned) bool {
				return p.share != nil && p.dev.Device == d.Device && p.dev.GPU.UUID == d.GPUUUID
			})
		}) {
			out = append(out, suspect{uid: uid})
		}
	}
	return out
}

// releaseStale asks the API server about each suspect, a prepared claim
// that holds a device the scheduler allocated to claim, and releases those
// it proves stale (staleness). It reports whether the prepare should be
// tried again: a suspect was released, or was unprepared meanwhile; and
// the error of a release that failed.
//
// m.mu is not held across the GET, so that other claims go on meanwhile;
// each suspect's own claim lock is, from before its entry is read until it
// is released. No prepare or unprepare of the suspect runs in between, so
// the GET is issued after every kubelet call on the suspect that came
// before has returned (its answer is at least as new as what those calls
// acted on), and the release happens before any later call starts (which
// then finds nothing recorded, and prepares from scratch what the claim
// is allocated then). Locks are taken in the order: the claim being
// prepared, the suspect, m.mu. No two prepares wait on each other's: one
// waiting here was refused before it was recorded, so it holds nothing
// and is nobody's suspect.
func (m *Manager) releaseStale(ctx context.Context, ref cdi.ClaimRef, suspects []suspect) (bool, error) {
	again := false
	for _, s := range suspects {
		released, err := m.releaseIfStale(ctx, ref, s)
		if err != nil {
			return false, err
		}
		again = again || released
	}
	return again, nil
}

func (m *Manager) releaseIfStale(ctx context.Context, ref cdi.ClaimRef, s suspect) (bool, error) {
	defer m.claimLocks.Lock(s.uid)()
	m.mu.Lock()
	c := m.cp.Claims[s.uid]
	if c == nil || c.State != checkpoint.PrepareCompleted {
		m.mu.Unlock()
		return true, nil
	}
	held := &checkpoint.Claim{UID: c.UID, Namespace: c.Namespace, Name: c.Name, Devices: slices.Clone(c.Devices)}
	m.mu.Unlock()

	obj, err := m.cfg.GetClaim(ctx, held.Namespace, held.Name)
	ev, detail := staleness(held, obj, err, m.cfg.DriverName)
	if ev == "" {
		klog.FromContext(ctx).Info("Not releasing the prepared claim that holds a device this claim needs", "claim", klog.KRef(ref.Namespace, ref.Name),
			"holder", klog.KRef(held.Namespace, held.Name), "holderUID", held.UID, "because", detail)
		return false, nil
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	// The entry read before the GET, unchanged: a failed save elsewhere
	// restores the state from a copy, which is then not the entry judged.
	if m.cp.Claims[s.uid] != c || c.State != checkpoint.PrepareCompleted {
		return true, nil
	}
	return true, m.release(ctx, ref, c, ev, "detail", detail)
}

// staleness judges the API server's answer to a GET of a recorded claim's
// namespace/name: the Evidence that proves the recorded claim gone, or ""
// and why not. Only a conclusive answer releases: any other error, or a
// claim of the recorded UID that is still allocated one of the devices it
// holds here, is a genuine conflict.
//
// A deleted claim does not come back and a UID is never reused, so
// EvidenceDeleted and EvidenceReplaced hold for good. An allocation is
// only ever set or cleared, never edited: a claim of the recorded UID that
// is allocated none of the devices it holds here was deallocated (it is
// reserved for no pod, so no pod the kubelet runs uses it), and the
// scheduler cannot give it back a device now allocated to the claim being
// prepared. The kubelet's own record may still list it until its
// reconcile unprepares it; that unprepare then finds nothing to do.
func staleness(rec *checkpoint.Claim, obj *resourceapi.ResourceClaim, err error, driver string) (Evidence, string) {
	switch {
	case apierrors.IsNotFound(err):
		return EvidenceDeleted, "no such claim"
	case err != nil:
		return "", fmt.Sprintf("get claim: %v", err)
	case string(obj.UID) != rec.UID:
		return EvidenceReplaced, fmt.Sprintf("the claim now has UID %s", obj.UID)
	case obj.Status.Allocation == nil:
		return EvidenceDeallocated, "the claim is not allocated"
	}
	for _, r := range obj.Status.Allocation.Devices.Results {
		if r.Driver != driver {
			continue
		}
		for _, d := range rec.Devices {
			if r.Pool == d.Pool && r.Device == d.Device {
				return "", fmt.Sprintf("the claim is still allocated device %s/%s", d.Pool, d.Device)
			}
		}
	}
	return EvidenceDeallocated, "the claim is allocated none of the devices it holds here"
}

// release unprepares c, a claim that holds devices the scheduler
// allocated to ref, on ev: what Unprepare does, with its saves and crash
// points (retire). m.mu is held.
func (m *Manager) release(ctx context.Context, ref cdi.ClaimRef, c *checkpoint.Claim, ev Evidence, kv ...any) error {
	args := append([]any{"stale", klog.KRef(c.Namespace, c.Name), "staleUID", c.UID, "claim", klog.KRef(ref.Namespace, ref.Name), "evidence", ev}, kv...)
	klog.FromContext(ctx).Info("Releasing a stale claim: another claim is allocated its devices", args...)
	if err := m.retire(ctx, c); err != nil {
		return fmt.Errorf("release stale claim %s/%s (%s): %w", c.Namespace, c.Name, ev, err)
	}
	if m.cfg.Released != nil {
		m.cfg.Released(ev, c.UID, ClaimRef{Namespace: c.Namespace, Name: c.Name})
	}
	return nil
}

// retire is Unprepare of a recorded claim with m.mu held throughout: for
// a claim with side effects UnprepareStarted is saved first, then spec,
// effects and entry go (teardown); a crash at any step is finished by the
// next start (recover.go) or the kubelet's retried unprepare.
func (m *Manager) retire(ctx context.Context, c *checkpoint.Claim) error {
	if holdsEffects(c) {
		prev := m.keep(c.UID)
		c.State = checkpoint.UnprepareStarted
		c.Updated = time.Now()
		if err := m.save(prev); err != nil {
			return err
		}
	}
	if err := m.crash(stepUnprepareStarted); err != nil {
		return err
	}
	return m.teardown(ctx, c, true)
}

// holdsAnyOf reports whether c holds what one of devs occupies.
func holdsAnyOf(c *checkpoint.Claim, devs []planned) bool {
	return slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool {
		if !holding(d) {
			return false
		}
		fp := recordedFootprint(d)
		return slices.ContainsFunc(devs, func(p planned) bool { return plannedFootprint(p).conflicts(fp) })
	})
}
