package memlimit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// Record says which container holds a claim device's limit: one file per
// claim device in the hook's state directory, written before the limit is
// set and removed after it is lifted, so what a crash leaves is a record
// of at most one limit, which the next hook or the claim's unprepare
// releases.
type Record struct {
	Limit
	// Container is the runtime's container ID, PID its init process (in
	// the runtime's PID namespace) and Cgroup its cgroup below the root.
	Container string `json:"container"`
	PID       int    `json:"pid"`
	Cgroup    string `json:"cgroup"`
	// file is the record's file, when it was read from one: what release
	// removes, rather than a path built from what the file says.
	file string
}

const recordExt = ".json"

// recordPath is r's file: one per claim device, or per container of it
// where each container is limited on its own.
func recordPath(stateDir string, r Record) string {
	name := r.ClaimUID + "." + r.Device
	if r.EachContainer {
		name += "." + r.Container
	}
	return filepath.Join(stateDir, name+recordExt)
}

func writeRecord(stateDir string, r Record) error {
	return fsutil.WriteJSON(recordPath(stateDir, r), r, false, 0o644)
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
	return &r, nil
}

// checkRecord reports whether r is a record the hook could have written:
// a valid limit, and a container and cgroup that name nothing outside the
// state directory and the cgroup root. Release checks each record it
// reads before it lifts anything.
func checkRecord(r Record) error {
	errs := []error{r.Limit.validate(), checkCgroup(r.Cgroup)}
	if r.Container == "" || strings.ContainsAny(r.Container, "/\x00") || r.Container == "." || r.Container == ".." {
		errs = append(errs, fmt.Errorf("container %q is not a container ID", r.Container))
	}
	return errors.Join(errs...)
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
