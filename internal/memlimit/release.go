package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// Release forgets container id, the poststop hook's work: it leaves the
// records whose pod it was a member of. A record with members left keeps
// its limit. One with none is released where its pod is gone, which in
// the simulator is now; on a node the pod's cgroup outlives its
// containers (the sandbox's is in it, and a sibling that did not name the
// claim may run on), so its limit stays until the claim's unprepare, or
// another pod's container finds the cgroup gone.
func Release(h Hook, id string, env Env) error {
	return eachRecord(h, func(r Record) error {
		i := r.member(id)
		if i < 0 {
			return nil
		}
		if err := checkRecord(r); err != nil {
			return release(h, env, r)
		}
		gone := r.Members[i]
		r.Members = slices.Delete(r.Members, i, i+1)
		if len(r.Members) == 0 && !env.holds(h, r) {
			return release(h, env, r)
		}
		var err error
		if r.EachContainer {
			err = liftWhereThere(h, env, r.Limit, gone.Cgroup)
		}
		return errors.Join(err, writeRecord(h.StateDir, r))
	})
}

// ReleaseClaim forgets the limits of every pod of the claim, which the
// agent calls when it unprepares it: the kubelet unprepares a claim only
// when no pod on the node uses it, so whatever records are left are of
// pods that are gone, or going (their cgroup not yet removed).
func ReleaseClaim(h Hook, claimUID string, env Env) error {
	return eachRecord(h, func(r Record) error {
		if r.ClaimUID != claimUID {
			return nil
		}
		return release(h, env, r)
	})
}

// eachRecord calls fn with every record of the state directory, its lock
// held, and joins what fn returns.
func eachRecord(h Hook, fn func(Record) error) error {
	unlock, err := lock(h.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	recs, err := Records(h.StateDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range recs {
		errs = append(errs, fn(r))
	}
	return errors.Join(errs...)
}

// release lifts r's limits where their cgroups are still there and
// removes r. A record that is not one the hook writes (checkRecord) has
// nothing lifted: its file goes, and the error names it.
func release(h Hook, env Env, r Record) error {
	file := r.path(h.StateDir)
	if err := checkRecord(r); err != nil {
		if rerr := os.Remove(file); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("memory limit record %s dropped, nothing lifted: %w", file, err)
	}
	var errs []error
	if r.EachContainer {
		for _, m := range r.Members {
			if m.Cgroup != r.Cgroup {
				errs = append(errs, liftWhereThere(h, env, r.Limit, m.Cgroup))
			}
		}
	}
	errs = append(errs, liftWhereThere(h, env, r.Limit, r.Cgroup))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// liftWhereThere lifts l from cgroup cg if it is still there (checked).
func liftWhereThere(h Hook, env Env, l Limit, cg string) error {
	d, err := dir(h.CgroupRoot, cg)
	if err != nil {
		return err
	}
	if _, err := os.Stat(d); err != nil {
		return nil
	}
	set, err := env.setter(h, l.Mechanism)
	if err != nil {
		return err
	}
	if err := set.Lift(h.CgroupRoot, cg, l); err != nil {
		return fmt.Errorf("lift %s from cgroup %s: %w", l, cg, err)
	}
	return nil
}
