package memlimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// Record says which pod holds a claim device's limit, and on which cgroup:
// one file per claim device (per claim device and pod where each container
// is limited on its own) in the hook's state directory, written before the
// limit is set and rewritten as the pod's containers come and go, so what
// a crash leaves is a record of at most one limit, which the next hook or
// the claim's unprepare releases.
type Record struct {
	Limit
	// Pod is the UID of the pod whose cgroup holds the limit; empty in a
	// record an earlier hook wrote, whose limit is on its one member's
	// own cgroup.
	Pod string `json:"pod,omitempty"`
	// Cgroup is the cgroup the limit is on, below the root: the pod's.
	Cgroup string `json:"cgroup"`
	// Members are the pod's containers that got the claim's device, in
	// the order they were created.
	Members []Member `json:"members,omitempty"`
	// file is the record's file, when it was read from one: what release
	// removes, rather than a path built from what the file says.
	file string
}

// Member is a container of the pod that got the claim's device: the
// runtime's container ID, its init process (in the runtime's PID
// namespace) and its own cgroup below the root.
type Member struct {
	Container string `json:"container"`
	PID       int    `json:"pid"`
	Cgroup    string `json:"cgroup"`
}

// legacyRecord is a record as hooks before pod limits wrote it: the limit
// on one container's own cgroup. A node upgraded while such a container
// runs keeps its record, which reads as a pod-less record of one member.
type legacyRecord struct {
	Container string `json:"container"`
	PID       int    `json:"pid"`
}

func (r *Record) UnmarshalJSON(b []byte) error {
	type plain Record // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var old legacyRecord
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if p.Pod == "" && len(p.Members) == 0 && old.Container != "" {
		p.Members = []Member{{Container: old.Container, PID: old.PID, Cgroup: p.Cgroup}}
	}
	file := r.file
	*r = Record(p)
	r.file = file
	return nil
}

const recordExt = ".json"

// recordPath is the file of l's record for the pod: one per claim device,
// or per claim device and pod where each container is limited on its own.
func recordPath(stateDir string, l Limit, pod string) string {
	name := l.ClaimUID + "." + l.Device
	if l.EachContainer {
		name += "." + pod
	}
	return filepath.Join(stateDir, name+recordExt)
}

func (r Record) path(stateDir string) string {
	if r.file != "" {
		return r.file
	}
	return recordPath(stateDir, r.Limit, r.Pod)
}

func writeRecord(stateDir string, r Record) error {
	return fsutil.WriteJSON(r.path(stateDir), r, false, 0o644)
}

func readRecord(p string) (*Record, error) {
	r := Record{file: p}
	found, err := fsutil.ReadJSON(p, &r)
	switch {
	case errors.Is(err, fsutil.ErrCorrupt):
		// A torn or foreign file holds nothing: it is replaced.
		return &Record{file: p}, nil
	case err != nil:
		return nil, err
	case !found:
		return nil, nil
	}
	r.file = p
	return &r, nil
}

// member returns the index of container id among r's members, or -1.
func (r Record) member(id string) int {
	return slices.IndexFunc(r.Members, func(m Member) bool { return m.Container == id })
}

// podBytes is the limit on the pod's cgroup: the share, which the pod's
// containers hold together; where each container is limited on its own,
// the sum of its members' limits, so that a container of the pod that did
// not get the device (handed an open one) has no more than they.
func (r Record) podBytes() int64 {
	if r.EachContainer {
		return r.Bytes * int64(max(len(r.Members), 1))
	}
	return r.Bytes
}

// checkRecord reports whether r is a record the hook could have written:
// a valid limit, a pod UID and container IDs that name nothing outside the
// state directory, and cgroups below the cgroup root, each member's below
// the pod's. Release checks each record it reads before it lifts anything.
func checkRecord(r Record) error {
	errs := []error{r.Limit.validate(), checkCgroup(r.Cgroup)}
	if r.Pod != "" {
		errs = append(errs, checkName("pod UID", r.Pod))
	}
	for _, m := range r.Members {
		errs = append(errs, checkName("container ID", m.Container), checkCgroup(m.Cgroup))
		if r.Pod != "" && path.Dir(m.Cgroup) != r.Cgroup {
			errs = append(errs, fmt.Errorf("container %s's cgroup %q is not in the pod's cgroup %q", m.Container, m.Cgroup, r.Cgroup))
		}
	}
	return errors.Join(errs...)
}

// checkName reports whether s can be a file name's part: no separator,
// no NUL, not "." or "..".
func checkName(what, s string) error {
	if s == "" || strings.ContainsAny(s, "/\x00\n") || s == "." || s == ".." {
		return fmt.Errorf("%s %q is not one", what, s)
	}
	return nil
}

// Records lists the state directory's records, sorted by file name; a
// missing directory holds none.
func Records(stateDir string) ([]Record, error) {
	names, err := fsutil.ListNames(stateDir, recordExt)
	if err != nil {
		return nil, fmt.Errorf("memory limit records: %w", err)
	}
	var out []Record
	for _, name := range names {
		r, err := readRecord(filepath.Join(stateDir, name))
		if err != nil {
			return nil, fmt.Errorf("memory limit records: %w", err)
		}
		if r != nil && r.ClaimUID != "" {
			out = append(out, *r)
		}
	}
	return out, nil
}

// lock takes the state directory's lock: hooks of containers created at
// once, and the agent, see each other's records whole.
func lock(stateDir string) (func(), error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("memory limit state: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(stateDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("memory limit state: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("memory limit state: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
