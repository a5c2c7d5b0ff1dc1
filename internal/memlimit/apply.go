package memlimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ReadState reads the OCI state the runtime gives a hook on its stdin.
func ReadState(r io.Reader) (specs.State, error) {
	var st specs.State
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return st, fmt.Errorf("the container's OCI state on stdin: %w", err)
	}
	if st.ID == "" {
		return st, errors.New("the container's OCI state on stdin names no container")
	}
	return st, nil
}

// HeldError is the refusal of a second container of a claim device whose
// limit another live container holds.
type HeldError struct{ By Record }

func (e *HeldError) Error() string {
	return fmt.Sprintf("its memory limit is held by container %s (cgroup %s): a share bounds one container at a time on its node, so a second container of the claim would double it (docs/sharing.md)", e.By.Container, e.By.Cgroup)
}

// Apply sets l on the cgroup of the container st is the state of, the
// createRuntime hook's work. A container already holding it (the hook run
// again) gets it again; another live container holding it refuses this one
// (HeldError); a dead holder's record is released first. A limit of
// EachContainer is each container's own: none is refused. On any error no
// record and no limit of this container is left.
func Apply(h Hook, l Limit, st specs.State, env Env) error {
	if st.Pid <= 0 {
		return fmt.Errorf("the container's OCI state has no process (pid %d): the hook must run as createRuntime", st.Pid)
	}
	set, err := env.setter(h, l.Mechanism)
	if err != nil {
		return err
	}
	cg, err := procCgroup(env.proc(), st.Pid, h.Simulated)
	if err != nil {
		return err
	}
	cgDir, err := dir(h.CgroupRoot, cg)
	if err != nil {
		return fmt.Errorf("the container's cgroup: %w", err)
	}
	if !h.Simulated {
		if _, err := os.Stat(cgDir); err != nil {
			return fmt.Errorf("the container's cgroup %s is not under the cgroup v2 root %s: %w", cg, h.CgroupRoot, err)
		}
	}
	unlock, err := lock(h.StateDir)
	if err != nil {
		return err
	}
	defer unlock()

	rec := Record{Limit: l, Container: st.ID, PID: st.Pid, Cgroup: cg}
	p := recordPath(h.StateDir, rec)
	old, err := readRecord(p)
	if err != nil {
		return fmt.Errorf("memory limit record: %w", err)
	}
	if old != nil && old.ClaimUID != "" && old.Container != st.ID {
		if env.alive(*old, h.Simulated) {
			return &HeldError{By: *old}
		}
		if err := release(h, env, *old); err != nil {
			return fmt.Errorf("release the limit of container %s, which is gone: %w", old.Container, err)
		}
	}
	if err := writeRecord(h.StateDir, rec); err != nil {
		return fmt.Errorf("memory limit record: %w", err)
	}
	if err := set.Set(h.CgroupRoot, cg, l); err != nil {
		err = fmt.Errorf("set %s on cgroup %s: %w", l, cg, err)
		// The container is not created; what was set of its limit goes
		// with its cgroup, the record with it.
		if h.Simulated {
			err = errors.Join(err, set.Lift(h.CgroupRoot, cg, l))
		}
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// alive reports whether r's container still runs: its init process is
// still in the cgroup the record names.
func (e Env) alive(r Record, simulated bool) bool {
	if r.PID <= 0 {
		return false
	}
	cg, err := procCgroup(e.proc(), r.PID, simulated)
	return err == nil && cg == r.Cgroup
}

// Release forgets the limits container id holds, the poststop hook's work:
// where its cgroup is still there (it is not, after runc), the limit is
// lifted; in the simulator its cgroup directory goes.
func Release(h Hook, id string, env Env) error {
	return releaseWhere(h, env, func(r Record) bool { return r.Container == id })
}

// ReleaseClaim forgets the limits of every container of the claim, which
// the agent calls when it unprepares it: the kubelet unprepares a claim
// only when no pod on the node uses it, so whatever records are left are
// of containers that are gone (a poststop hook that never ran).
func ReleaseClaim(h Hook, claimUID string, env Env) error {
	return releaseWhere(h, env, func(r Record) bool { return r.ClaimUID == claimUID })
}

func releaseWhere(h Hook, env Env, match func(Record) bool) error {
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
		if match(r) {
			errs = append(errs, release(h, env, r))
		}
	}
	return errors.Join(errs...)
}

// release lifts r's limit where its cgroup is still there and removes r.
// A record that is not one the hook writes (checkRecord) has nothing
// lifted: its file goes, and the error names it.
func release(h Hook, env Env, r Record) error {
	file := r.file
	if file == "" {
		file = recordPath(h.StateDir, r)
	}
	if err := checkRecord(r); err != nil {
		if rerr := os.Remove(file); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("memory limit record %s dropped, nothing lifted: %w", file, err)
	}
	d, _ := dir(h.CgroupRoot, r.Cgroup) // checkRecord checked the cgroup
	if _, err := os.Stat(d); err == nil {
		set, err := env.setter(h, r.Mechanism)
		if err != nil {
			return err
		}
		if err := set.Lift(h.CgroupRoot, r.Cgroup, r.Limit); err != nil {
			return fmt.Errorf("lift %s from cgroup %s: %w", r.Limit, r.Cgroup, err)
		}
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
