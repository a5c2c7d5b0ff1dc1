package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-gpu/tessera/pkg/fsutil"
)

// DefaultPath is where the node agent keeps its checkpoint: in its kubelet
// plugin directory, which survives agent restarts and upgrades.
const DefaultPath = "/var/lib/kubelet/plugins/gpu.tessera.dev/checkpoint.json"

// ErrCorrupt is wrapped by Load's error when the file was unusable and has
// been moved aside.
var ErrCorrupt = errors.New("checkpoint corrupt")

// Store keeps the checkpoint in two files, the path and the path with ".1"
// appended, and writes each save in place into the one that does not hold
// the newest state, with a sequence number one above it. A save the agent
// is killed in the middle of tears only that file; the other still holds
// the last state a save returned, so no temporary file and no rename are
// needed: on a disk they cost a create, a rename and an unlink of inodes
// per save, far more than writing the same bytes in place, on every
// prepare and unprepare (docs/performance.md). Loading takes
// the valid file with the higher sequence.
//
// Its methods are serialized, so concurrent callers cannot interleave a
// save with the move-aside of corrupt files.
type Store struct {
	path string
	mu   sync.Mutex
	// scanned is set once seq and next are known (the first Load or Save);
	// seq is the newest sequence on disk, next the file the next save
	// writes (0: path, 1: path.1).
	scanned bool
	seq     uint64
	next    int
	last    []byte // what the newest save wrote, for Mirror
}

// NewStore returns a Store for the file at path.
func NewStore(path string) *Store {
	return &Store{path: path}
}

// Path is the checkpoint file's path (the first of its two files).
func (s *Store) Path() string { return s.path }

func slotPaths(path string) [2]string { return [2]string{path, path + ".1"} }

// slot is what one of the two files holds.
type slot struct {
	path    string
	present bool
	cp      *Checkpoint // nil when absent or invalid
	seq     uint64
	mod     time.Time
	err     error // why a present file is invalid
}

// readSlots reads and decodes both files. An error other than a missing
// file is returned as is: the file may be fine, nothing may be saved over
// it.
func readSlots(path string) ([2]slot, error) {
	var out [2]slot
	for i, p := range slotPaths(path) {
		out[i].path = p
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("read checkpoint %s: %w", p, err)
		}
		out[i].present = true
		out[i].cp, out[i].seq, out[i].err = decode(data)
		if st, err := os.Stat(p); err == nil {
			out[i].mod = st.ModTime()
		}
	}
	return out, nil
}

// newest is the index of the valid slot with the higher sequence (the
// first file on a tie, as Mirror leaves them), or -1. A file without a
// sequence was written by an agent from before the two files (one the node
// was downgraded to, say): it is the newer only if it was modified after
// the other (not on equal times: file times are coarse, and an agent that
// finds such a file saves after reading it).
func newest(slots [2]slot) int {
	a, b := slots[0], slots[1]
	switch {
	case a.cp == nil && b.cp == nil:
		return -1
	case a.cp == nil:
		return 1
	case b.cp == nil:
		return 0
	case (a.seq == 0) != (b.seq == 0):
		old := 0 // the file without a sequence
		if b.seq == 0 {
			old = 1
		}
		if slots[old].mod.After(slots[1-old].mod) {
			return old
		}
		return 1 - old
	case b.seq > a.seq:
		return 1
	}
	return 0
}

// use records which file holds the newest state, so saves go to the other.
func (s *Store) use(slots [2]slot, best int) {
	s.scanned, s.seq, s.next = true, 0, 0
	if best >= 0 {
		s.seq, s.next = slots[best].seq, 1-best
	}
}

// Load reads the checkpoint: the newest valid of its two files. None
// gives an empty checkpoint.
//
// When neither file is a valid checkpoint (bad JSON, checksum mismatch,
// unknown version, inconsistent entries) they are renamed to
// <file>.corrupt-<unix nanos> and Load returns an empty checkpoint with an
// error wrapping ErrCorrupt: the caller logs it and rebuilds from the CDI
// specs, instead of failing at every restart over the same file. One
// invalid file beside a valid one is what a save cut short leaves; the next
// save overwrites it. Any other read failure returns a nil checkpoint and
// the error; the file may be fine, so the caller must not save over it.
func (s *Store) Load() (*Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	// Agents before the two files wrote a temp file and renamed it; one
	// killed in between left the temp file behind.
	if err := fsutil.RemoveTemps(s.path); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", s.path, err)
	}
	slots, err := readSlots(s.path)
	if err != nil {
		return nil, err
	}
	best := newest(slots)
	s.use(slots, best)
	if best >= 0 {
		return slots[best].cp, nil
	}
	if !slots[0].present && !slots[1].present {
		return New(), nil
	}
	var errs []error
	for _, sl := range slots {
		if !sl.present {
			continue
		}
		aside := sl.path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if rnErr := os.Rename(sl.path, aside); rnErr != nil {
			// The next Save replaces the file anyway; only the evidence is lost.
			errs = append(errs, fmt.Errorf("%s: %w (moving it aside failed: %v)", sl.path, sl.err, rnErr))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %w (moved to %s)", sl.path, sl.err, aside))
	}
	return New(), fmt.Errorf("%w: %w", ErrCorrupt, errors.Join(errs...))
}

// Read decodes the checkpoint at path (the newest valid of its two files)
// without the agent's recovery (bad files are an error and stay where they
// are): for tools and tests reading an agent's state. No file is an empty
// checkpoint.
func Read(path string) (*Checkpoint, error) {
	slots, err := readSlots(path)
	if err != nil {
		return nil, err
	}
	if best := newest(slots); best >= 0 {
		return slots[best].cp, nil
	}
	for _, sl := range slots {
		if sl.present {
			return nil, fmt.Errorf("checkpoint %s: %w", sl.path, sl.err)
		}
	}
	return New(), nil
}

// Save writes cp, in the current format version, into the file that does
// not hold the newest state, creating the directory if needed, without
// fsync. A crash of the agent loses nothing: the page cache holds the
// files, and a save it cut short leaves the other file as the last save
// left it. What loses the page cache (a power loss, a kernel crash)
// reboots the node, and every partition, daemon and setting a claim held
// goes with it; the recovery that follows needs no particular version of
// the checkpoint: an older one, or none the checksum accepts (then rebuilt
// from the CDI specs), serves as well as the newest. A claim missing from it
// is prepared from scratch when the kubelet asks again; one whose unprepare
// it lost is unconfirmed and yields its devices (pkg/claims).
func (s *Store) Save(cp *Checkpoint) error {
	if cp == nil {
		return fmt.Errorf("save checkpoint %s: nil checkpoint", s.path)
	}
	out := *cp // shallow: only Version changes, cp is not modified
	out.Version = CurrentVersion

	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.scanned {
		// Saved before any Load (a fresh store in tests, a tool): the files
		// on disk decide where the newest state is.
		slots, err := readSlots(s.path)
		if err != nil {
			return fmt.Errorf("save checkpoint %s: %w", s.path, err)
		}
		s.use(slots, newest(slots))
	}
	data, err := encode(&out, s.seq+1)
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	// Only the agent reads it; it holds pod and claim names.
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	target := slotPaths(s.path)[s.next]
	if err := writeInPlace(target, data); err != nil {
		// The file is torn or empty now; the other still holds the newest
		// state, so the next save writes this one again.
		return fmt.Errorf("save checkpoint %s: %w", target, err)
	}
	s.seq++
	s.next = 1 - s.next
	s.last = data
	return nil
}

// Mirror writes the newest state this store saved into the other file too,
// for a graceful stop: an agent from before the two files, should the node
// be downgraded to one, reads only the first, which may be a save behind.
func (s *Store) Mirror() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return nil
	}
	target := slotPaths(s.path)[s.next]
	if err := writeInPlace(target, s.last); err != nil {
		return fmt.Errorf("mirror checkpoint to %s: %w", target, err)
	}
	return nil
}

// writeInPlace overwrites path from its start with data and cuts what is
// left of a longer content (mode 0600 when it creates it). It neither
// truncates first nor replaces the file: growing or replacing a file costs
// its file system a block allocation or a new inode, and a cut-short write
// needs neither (the checksum rejects a mix of old and new bytes, and the
// other file holds the previous state).
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = func() error {
		if _, err := f.WriteAt(data, 0); err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.Size() > int64(len(data)) {
			return f.Truncate(int64(len(data)))
		}
		return nil
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
