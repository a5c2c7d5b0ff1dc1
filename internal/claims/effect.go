package claims

import (
	"context"
	"errors"
	"fmt"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// effect is one kind of change a claim makes to the node beyond its CDI
// spec (a side effect): partitions carved with the MIG mode they need
// (effect_partitions.go), time-slice intervals (effect_interval.go), MPS
// daemons (effect_mps.go). The state machine knows none of them by name:
// prepare, rollback, recovery and the periodic checks walk the lists
// below, and each effect says what it does at each point.
type effect interface {
	// plan writes into rec what prepare will do for device d, so that it
	// is saved with PrepareStarted before it is done, and reports whether
	// d needs this effect. A claim no effect plans for is a plain claim:
	// no intent is saved (doc.go).
	plan(m *Manager, d *planned, rec *checkpoint.Device) bool
	// holds reports whether the recorded device d has this effect on the
	// node: an unprepare of a claim holding one saves its intent first.
	holds(d checkpoint.Device) bool
	// check refuses devs, before anything is done, where they conflict
	// with what other prepared claims hold of this effect. m.mu is held.
	check(ctx context.Context, m *Manager, uid string, devs []planned) error
	// apply makes the change, after PrepareStarted is saved, filling in
	// devs (what the CDI spec gets) and entry (saving it where a crash
	// must find what was done). m.mu is held.
	apply(ctx context.Context, m *Manager, entry *checkpoint.Claim, devs []planned) error
	// undo removes what c holds of this effect, unless another claim
	// still holds it. Each step is idempotent: rollback runs again after
	// a crash at any point. m.mu is held, unless claimOwned.
	undo(ctx context.Context, m *Manager, c *checkpoint.Claim) error
	// claimOwned reports whether what undo removes belongs to the claim
	// alone (named by its UID), so that undo runs for a plain claim too,
	// without m.mu; otherwise undo runs only for a claim that holds
	// effects, under m.mu.
	claimOwned() bool
	// edits adds to s what the claim's CDI spec gets from this effect, for
	// its devices as resolved now (with what apply or ensure filled in):
	// the edits of a device's own CDI device, claim-level devices.
	edits(m *Manager, s *claimSpec) error
	// ensure makes the node hold what the prepared claim r records, on
	// occasion occ, and returns how many MPS daemons it found dead and
	// started again (Config.MPSRestarted). m.mu is held.
	ensure(ctx context.Context, m *Manager, r *recorded, occ occasion) (restarted int, err error)
	// sweep removes from the node what this effect left that no claim
	// holds, on occasion occ, and returns how many partitions it
	// destroyed. It logs what it could not remove; its error (the node
	// could not be read) stops the agent's start. m.mu is held.
	sweep(ctx context.Context, m *Manager, occ occasion) (destroyed int, err error)
}

// effects are the side effects in the order prepare applies them:
// partitions first (an MPS daemon serves the partition's UUID, and a whole
// GPU's MIG mode goes off before its interval is set, or before it is
// passed through), then passthroughs (vfio-pci), then intervals,
// then MPS daemons, then memory limits (set by the hook when a container
// starts; prepare only writes the hook into the spec). Checks, ensures,
// sweeps and the spec's edits walk them in this order too.
var effects = []effect{partitions{}, passthrough{}, intervals{}, mpsDaemons{}, memoryLimits{}}

// undoOrder is the order rollback undoes them: a passed GPU first, back to
// its driver (no other effect holds a passed GPU), then an MPS daemon, as it
// holds the partitions it serves, then the partitions, whose hardware goes
// even when an interval cannot be restored, then the intervals, then the
// memory limits' records, which no container holds any more.
var undoOrder = []effect{passthrough{}, mpsDaemons{}, partitions{}, intervals{}, memoryLimits{}}

// occasion is when ensure or sweep runs.
type occasion int

const (
	// atStart: recovery, after rolling back interrupted claims. A reboot
	// may have reset what prepared claims hold; a crash may have left
	// what no claim holds.
	atStart occasion = iota
	// onWatch: the agent's periodic check of prepared claims
	// (EnsureSharing).
	onWatch
	// onPrepare: the kubelet prepares a claim that is prepared already
	// (ensureSpec).
	onPrepare
	// onSweep: the driver's retry of partitions no claim holds
	// (SweepOrphans).
	onSweep
)

// recorded is a prepared claim as ensure sees it: its entry, and its
// devices as the node publishes them now, resolved on first use (a claim
// whose effects need nothing must not fail on a device it cannot
// resolve) and then shared, so that what an effect fills in (an MPS
// device's pipe directory) reaches a rewritten CDI spec.
type recorded struct {
	c    *checkpoint.Claim
	devs []cdi.ClaimDevice
}

func (r *recorded) devices(m *Manager) ([]cdi.ClaimDevice, error) {
	if r.devs == nil {
		devs, err := m.resolveRecorded(r.c)
		if err != nil {
			return nil, err
		}
		r.devs = devs
	}
	return r.devs, nil
}

// nothing is an effect's default for the points where it has nothing to
// do; an effect embeds it and defines the rest.
type nothing struct{}

func (nothing) check(context.Context, *Manager, string, []planned) error { return nil }

func (nothing) ensure(context.Context, *Manager, *recorded, occasion) (int, error) { return 0, nil }

func (nothing) sweep(context.Context, *Manager, occasion) (int, error) { return 0, nil }

func (nothing) claimOwned() bool { return false }

func (nothing) edits(*Manager, *claimSpec) error { return nil }

// plan records devs in the PrepareStarted entry and reports whether any
// effect changes the node for them.
func (m *Manager) plan(entry *checkpoint.Claim, devs []planned) (changes bool) {
	for i := range devs {
		d := &devs[i]
		rec := d.dev.Checkpoint()
		if d.dev.AdminAccess {
			// A monitor's device: nothing changes on the node for it.
			entry.Devices = append(entry.Devices, rec)
			continue
		}
		for _, e := range effects {
			if e.plan(m, d, &rec) {
				changes = true
			}
		}
		entry.Devices = append(entry.Devices, rec)
	}
	return changes
}

// holdsEffects reports whether a recorded claim has any effect on the node.
func holdsEffects(c *checkpoint.Claim) bool {
	for _, d := range c.Devices {
		for _, e := range effects {
			if e.holds(d) {
				return true
			}
		}
	}
	return false
}

func (m *Manager) checkEffects(ctx context.Context, uid string, devs []planned) error {
	for _, e := range effects {
		if err := e.check(ctx, m, uid, devs); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) applyEffects(ctx context.Context, entry *checkpoint.Claim, devs []planned) error {
	for _, e := range effects {
		if err := e.apply(ctx, m, entry, devs); err != nil {
			return err
		}
	}
	return nil
}

// undoEffects undoes what c holds. held: m.mu is held and c may hold any
// effect; otherwise c is a plain claim, and only what it owns alone goes
// (claimOwned).
func (m *Manager) undoEffects(ctx context.Context, c *checkpoint.Claim, held bool) error {
	for _, e := range undoOrder {
		if !held && !e.claimOwned() {
			continue
		}
		if err := e.undo(ctx, m, c); err != nil {
			return err
		}
	}
	return nil
}

// ensureClaim is every effect's ensure of one prepared claim; it stops at
// the first failure.
func (m *Manager) ensureClaim(ctx context.Context, r *recorded, occ occasion) (restarted int, err error) {
	for _, e := range effects {
		n, err := e.ensure(ctx, m, r, occ)
		if err != nil {
			return restarted, err
		}
		restarted += n
	}
	return restarted, nil
}

// ensurePrepared makes the node match every prepared claim's record, on
// occasion occ, and returns how many MPS daemons had to be started again.
// A claim's failure is collected and the others still served.
func (m *Manager) ensurePrepared(ctx context.Context, occ occasion) (restarted int, err error) {
	var errs []error
	for _, c := range sortedClaims(m.cp) {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		r := &recorded{c: c}
		for _, e := range effects {
			n, err := e.ensure(ctx, m, r, occ)
			if err != nil {
				errs = append(errs, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err))
				continue
			}
			restarted += n
		}
	}
	if restarted > 0 && m.cfg.MPSRestarted != nil {
		m.cfg.MPSRestarted(restarted)
	}
	return restarted, withKind(ErrSharing, errors.Join(errs...))
}

// sweepEffects is every effect's sweep, on occasion occ; it returns how
// many partitions went.
func (m *Manager) sweepEffects(ctx context.Context, occ occasion) (destroyed int, err error) {
	for _, e := range effects {
		n, err := e.sweep(ctx, m, occ)
		destroyed += n
		if err != nil {
			return destroyed, err
		}
	}
	return destroyed, nil
}
