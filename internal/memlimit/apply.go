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

// HeldError is the refusal of a container of another pod than the one
// whose cgroup holds the claim device's limit, while that pod lives.
type HeldError struct{ By Record }

func (e *HeldError) Error() string {
	by := "pod " + e.By.Pod
	if e.By.Pod == "" {
		by = "a container"
	}
	var ids []string
	for _, m := range e.By.Members {
		ids = append(ids, m.Container)
	}
	return fmt.Sprintf("its memory limit is held by %s (cgroup %s, containers %v): a share bounds one pod at a time on its node, so a second pod of the claim would double it (docs/sharing.md)", by, e.By.Cgroup, ids)
}

// Apply sets l on the cgroup of the pod of the container st is the state
// of, the createRuntime hook's work, and records the container as one of
// the pod's members. A container of the pod already holding the limit
// joins it (a sibling naming the same claim, a restarted container, the
// hook run again); a container of another pod is refused while that pod
// lives (HeldError), and a gone pod's record is released first. A limit
// of EachContainer is each pod's own, none refused: it is also set on the
// container's own cgroup, and the pod's is the sum of its members'. On any
// error the record and limits are as they were.
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
	p, err := podOf(st, cg)
	if err != nil {
		return err
	}
	if !h.Simulated {
		for _, c := range []string{p.Cgroup, cg} {
			d, err := dir(h.CgroupRoot, c)
			if err == nil {
				_, err = os.Stat(d)
			}
			if err != nil {
				return fmt.Errorf("the container's cgroup %s is not under the cgroup v2 root %s: %w", c, h.CgroupRoot, err)
			}
		}
	}
	unlock, err := lock(h.StateDir)
	if err != nil {
		return err
	}
	defer unlock()

	file := recordPath(h.StateDir, l, p.UID)
	old, err := readRecord(file)
	if err != nil {
		return fmt.Errorf("memory limit record: %w", err)
	}
	rec := Record{Limit: l, Pod: p.UID, Cgroup: p.Cgroup, file: file}
	switch {
	case old == nil || old.ClaimUID == "":
	case old.Pod == p.UID && old.Cgroup == p.Cgroup:
		rec.Members = env.live(*old, h.Simulated, st.ID)
	case env.holds(h, *old):
		return &HeldError{By: *old}
	default:
		if err := release(h, env, *old); err != nil {
			return fmt.Errorf("release the limit of pod %s, which is gone: %w", old.Pod, err)
		}
		old = nil
	}
	rec.Members = append(rec.Members, Member{Container: st.ID, PID: st.Pid, Cgroup: cg})
	if err := writeRecord(h.StateDir, rec); err != nil {
		return fmt.Errorf("memory limit record: %w", err)
	}
	if err := setLimits(h, set, rec, cg); err != nil {
		return errors.Join(err, undoApply(h, set, rec, old, cg))
	}
	return nil
}

// setLimits sets rec's limit on its pod's cgroup and, where each container
// is limited on its own, l on the container's cgroup cg.
func setLimits(h Hook, set Setter, rec Record, cg string) error {
	pl := rec.Limit
	pl.Bytes = rec.podBytes()
	if err := set.Set(h.CgroupRoot, rec.Cgroup, pl); err != nil {
		return fmt.Errorf("set %s on pod cgroup %s: %w", pl, rec.Cgroup, err)
	}
	if rec.EachContainer {
		if err := set.Set(h.CgroupRoot, cg, rec.Limit); err != nil {
			return fmt.Errorf("set %s on cgroup %s: %w", rec.Limit, cg, err)
		}
	}
	return nil
}

// undoApply puts back what Apply found when a limit could not be set: the
// container is not created, and what was set on its own cgroup goes with
// it; the pod's record and limit are the ones before it, or none.
func undoApply(h Hook, set Setter, rec Record, old *Record, cg string) error {
	var errs []error
	if h.Simulated && rec.EachContainer {
		errs = append(errs, set.Lift(h.CgroupRoot, cg, rec.Limit))
	}
	if old != nil && old.ClaimUID != "" {
		errs = append(errs, writeRecord(h.StateDir, *old))
		return errors.Join(errs...)
	}
	if h.Simulated {
		errs = append(errs, set.Lift(h.CgroupRoot, rec.Cgroup, rec.Limit))
	}
	if err := os.Remove(rec.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// live are r's members still running, but for container id (which is
// being created again).
func (e Env) live(r Record, simulated bool, id string) []Member {
	var out []Member
	for _, m := range r.Members {
		if m.Container != id && e.alive(m, simulated) {
			out = append(out, m)
		}
	}
	return out
}

// holds reports whether r's pod still holds its limit: on a node, while
// its cgroup is there (the kubelet removes it once every container of the
// pod is gone, those without the device included); in the simulator,
// whose tree the runtime does not keep, while a member runs.
func (e Env) holds(h Hook, r Record) bool {
	if !h.Simulated && r.Pod != "" {
		if d, err := dir(h.CgroupRoot, r.Cgroup); err == nil {
			if _, err := os.Stat(d); err == nil {
				return true
			}
		}
	}
	return len(e.live(r, h.Simulated, "")) > 0
}

// alive reports whether m still runs: its init process is still in the
// cgroup the record names.
func (e Env) alive(m Member, simulated bool) bool {
	if m.PID <= 0 {
		return false
	}
	cg, err := procCgroup(e.proc(), m.PID, simulated)
	return err == nil && cg == m.Cgroup
}
