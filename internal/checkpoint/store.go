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

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// DefaultPath is where the node agent keeps its checkpoint: in its kubelet
// plugin directory, which survives agent restarts and upgrades.
const DefaultPath = "/var/lib/kubelet/plugins/gpu.tessera.dev/checkpoint.json"

// ErrCorrupt is wrapped by Load's error when the file was unusable and has
// been moved aside.
var ErrCorrupt = errors.New("checkpoint corrupt")

// Store keeps the checkpoint in two snapshot files, the path and the path
// with ".1" appended, and a log beside them, the path with ".log" appended
// (log.go).
//
// A snapshot is the whole state. Each is written in place into the file
// that does not hold the newest one, with a sequence number one above the
// last save's. A save the agent is killed in the middle of tears only that
// file; the other still holds the last state a save returned, so no
// temporary file and no rename are needed: on a disk they cost a create, a
// rename and an unlink of inodes per save, far more than writing the same
// bytes in place, on every prepare and unprepare (docs/performance.md).
//
// The saves between two snapshots (SaveChanges) append what they changed
// to the log instead, one record per save, so a save costs the claims it
// changed, not every claim held. When the log has grown past the snapshot
// (and past minLogBytes), the next save writes a snapshot instead, the
// compaction, and the log starts again after it. The store keeps the state
// on disk in memory for that, so a compaction needs nothing of the caller.
//
// Loading takes the valid snapshot with the higher sequence and replays the
// log's records that follow it. After Mirror (a graceful stop) both
// snapshot files hold the newest state and there is no log: what an agent
// from before the log reads.
//
// Its methods are serialized, so concurrent callers cannot interleave a
// save with the move-aside of corrupt files.
type Store struct {
	path string
	mu   sync.Mutex
	// scanned is set once seq and next are known (the first Load or save);
	// seq is the newest sequence on disk (a snapshot's or a log record's),
	// next the file the next snapshot is written to (0: path, 1: path.1).
	scanned bool
	seq     uint64
	next    int
	// base names the newest snapshot on disk (haveBase: there is one), by
	// sequence and checksum; baseBytes is its size.
	haveBase  bool
	baseSeq   uint64
	baseSum   string
	baseBytes int
	last      []byte // what the newest snapshot this store wrote holds, for Mirror
	// state is what is on disk (the newest snapshot and the log after it),
	// nil until a Load or a save read or wrote it.
	state *Checkpoint
	// logOK: the log on disk follows base and holds every save since, its
	// valid lines ending at logEnd; cut: bytes beyond logEnd (a torn tail)
	// go before the next append.
	logOK  bool
	logEnd int64
	cut    bool
	// snapshotNext: the next save writes a snapshot (after a failed one, so
	// that it overwrites what the failed write may have left).
	snapshotNext bool
}

// Changes is what one save changes (SaveChanges).
type Changes struct {
	// Full, if not nil, is a whole state, whose claims are replaced by it
	// (then Claims apply on top of them): the save writes a snapshot.
	Full *Checkpoint
	// Claims are the claims that changed, by UID: put as they are, or
	// deleted when nil.
	Claims map[string]*Claim
	// BootID and PartitionModeOn are the node-wide fields, whole: each
	// save writes them (they are small).
	BootID          string
	PartitionModeOn []string
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
	sum     string
	size    int
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
		out[i].present, out[i].size = true, len(data)
		out[i].cp, out[i].seq, out[i].sum, out[i].err = decodeSum(data)
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

// use records which file holds the newest snapshot, so snapshots go to the
// other, and that no log follows it yet.
func (s *Store) use(slots [2]slot, best int) {
	s.scanned, s.seq, s.next = true, 0, 0
	s.haveBase, s.baseSeq, s.baseSum, s.baseBytes = false, 0, "", 0
	s.logOK, s.logEnd, s.cut, s.snapshotNext = false, 0, false, false
	s.state, s.last = nil, nil
	if best >= 0 {
		b := slots[best]
		s.seq, s.next = b.seq, 1-best
		s.haveBase, s.baseSeq, s.baseSum, s.baseBytes = true, b.seq, b.sum, b.size
	}
}

// useLog records what readLog found of the log after the newest snapshot.
func (s *Store) useLog(sc logScan) {
	s.seq = sc.seq
	s.logOK = sc.based && sc.bad == nil
	s.logEnd = sc.end
	s.cut = sc.size != sc.end
}

// Load reads the checkpoint: the newest valid of its two snapshot files,
// and the log's records after it. None gives an empty checkpoint.
//
// When neither file is a valid checkpoint (bad JSON, checksum mismatch,
// unknown version, inconsistent entries) they are renamed to
// <file>.corrupt-<unix nanos>, the log with them, and Load returns an empty
// checkpoint with an error wrapping ErrCorrupt: the caller logs it and
// rebuilds from the CDI specs, instead of failing at every restart over the
// same file. One invalid file beside a valid one is what a save cut short
// leaves; the next snapshot overwrites it. So is a last log record cut
// short (no newline): it is dropped, and the next record written over it.
//
// A log record that does not verify is corruption: the log is moved aside
// the same way and Load returns the state before that record with an error
// wrapping ErrLogCorrupt (the next save writes a snapshot). Any other read
// failure returns a nil checkpoint and the error; the file may be fine, so
// the caller must not save over it.
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
		cp := slots[best].cp
		sc, err := readLog(logPath(s.path), s.baseSeq, s.baseSum, cp)
		if err != nil {
			s.scanned = false
			return nil, err
		}
		s.useLog(sc)
		s.state = cp.Clone()
		if sc.bad == nil {
			return cp, nil
		}
		err = moveAside(logPath(s.path), sc.bad)
		return cp, fmt.Errorf("%w: %w; loaded the state before it, sequence %d", ErrLogCorrupt, err, sc.seq)
	}
	s.state = New()
	if !slots[0].present && !slots[1].present {
		return New(), nil
	}
	var errs []error
	for _, sl := range slots {
		if sl.present {
			errs = append(errs, moveAside(sl.path, sl.err))
		}
	}
	// The log follows one of them: it goes with them.
	if _, err := os.Stat(logPath(s.path)); err == nil {
		errs = append(errs, moveAside(logPath(s.path), errors.New("no snapshot to replay it on")))
	}
	return New(), fmt.Errorf("%w: %w", ErrCorrupt, errors.Join(errs...))
}

// moveAside renames the file at path, invalid because of why, to
// <path>.corrupt-<unix nanos>, and returns the error that says so.
func moveAside(path string, why error) error {
	aside := path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := os.Rename(path, aside); err != nil {
		// The next save replaces the file anyway; only the evidence is lost.
		return fmt.Errorf("%s: %w (moving it aside failed: %v)", path, why, err)
	}
	return fmt.Errorf("%s: %w (moved to %s)", path, why, aside)
}

// Read decodes the checkpoint at path (the newest valid of its two files
// and the log after it) without the agent's recovery (bad files are an
// error and stay where they are): for tools and tests reading an agent's
// state. No file is an empty checkpoint.
func Read(path string) (*Checkpoint, error) {
	slots, err := readSlots(path)
	if err != nil {
		return nil, err
	}
	if best := newest(slots); best >= 0 {
		cp := slots[best].cp
		sc, err := readLog(logPath(path), slots[best].seq, slots[best].sum, cp)
		if err != nil {
			return nil, err
		}
		if sc.bad != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrLogCorrupt, logPath(path), sc.bad)
		}
		return cp, nil
	}
	for _, sl := range slots {
		if sl.present {
			return nil, fmt.Errorf("checkpoint %s: %w", sl.path, sl.err)
		}
	}
	return New(), nil
}

// scan reads what is on disk, as Read does, for a save before any Load.
func (s *Store) scan() error {
	slots, err := readSlots(s.path)
	if err != nil {
		return err
	}
	best := newest(slots)
	s.use(slots, best)
	if best < 0 {
		// Nothing valid (or nothing): the first save writes a snapshot,
		// which does not read the state.
		s.state = New()
		return nil
	}
	cp := slots[best].cp
	sc, err := readLog(logPath(s.path), s.baseSeq, s.baseSum, cp)
	if err != nil {
		s.scanned = false
		return err
	}
	s.useLog(sc)
	s.state = cp
	return nil
}

// Save writes cp, in the current format version, as a snapshot: into the
// file that does not hold the newest snapshot, creating the directory if
// needed, without fsync. A crash of the agent loses nothing: the page cache
// holds the files, and a save it cut short leaves the other file as the
// last save left it. What loses the page cache (a power loss, a kernel
// crash) reboots the node, and every partition, daemon and setting a claim
// held goes with it; the recovery that follows needs no particular version
// of the checkpoint: an older one, or none the checksum accepts (then
// rebuilt from the CDI specs), serves as well as the newest. A claim
// missing from it is prepared from scratch when the kubelet asks again;
// one whose unprepare it lost is unconfirmed and yields its devices
// (internal/claims). cp is not modified, nor kept.
func (s *Store) Save(cp *Checkpoint) error {
	if cp == nil {
		return fmt.Errorf("save checkpoint %s: nil checkpoint", s.path)
	}
	full := cp.Clone()
	return s.SaveChanges(&Changes{Full: full, BootID: full.BootID, PartitionModeOn: full.PartitionModeOn})
}

// SaveChanges saves what ch changed of the state on disk: as one record
// appended to the log, or, with ch.Full, after a failed snapshot or when
// the log has grown past the snapshot, as a snapshot (Save). It takes ch's
// claims (and ch.Full) as they are: the caller must not modify them after.
// The crash model is Save's: an append cut short leaves a torn last record,
// dropped at the next Load, and the state as the previous save left it.
func (s *Store) SaveChanges(ch *Changes) error {
	for uid, c := range ch.Claims {
		if c == nil {
			continue
		}
		if err := c.valid(uid); err != nil {
			return fmt.Errorf("save checkpoint %s: %w", s.path, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.scanned || s.state == nil {
		// Saved before any Load (a fresh store in tests, a tool): the files
		// on disk decide where the newest state is.
		if err := s.scan(); err != nil {
			return fmt.Errorf("save checkpoint %s: %w", s.path, err)
		}
	}
	if ch.Full != nil || s.snapshotNext || !s.haveBase || (!s.logOK && s.seq != s.baseSeq) {
		return s.snapshot(ch)
	}
	rec, err := encodeRecord(ch, s.state, s.seq+1)
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	if end := s.logEnd + int64(len(rec)); end > int64(max(s.baseBytes, minLogBytes)) {
		return s.snapshot(ch) // compaction
	}
	lp := logPath(s.path)
	if s.logOK {
		err = appendLog(lp, rec, s.logEnd, s.cut)
	} else {
		// The first record after a snapshot: the log starts again.
		data := append(encodeHeader(s.baseSeq, s.baseSum), rec...)
		if err = writeLog(lp, data); err == nil {
			s.logOK, s.logEnd, s.cut = true, int64(len(data))-int64(len(rec)), false
		}
	}
	if err != nil {
		// What the write left is a torn tail at most; a snapshot, which
		// needs no log, saves the changes instead (and the log starts
		// again after it).
		s.cut = true
		if serr := s.snapshot(ch); serr != nil {
			return fmt.Errorf("save checkpoint %s: %w (and a snapshot instead: %w)", lp, err, serr)
		}
		return nil
	}
	s.logEnd += int64(len(rec))
	s.cut = false
	s.seq++
	s.state.apply(ch)
	return nil
}

// snapshot writes the state with ch applied as a snapshot, sequence seq+1,
// into the file that does not hold the newest one. s.mu is held.
func (s *Store) snapshot(ch *Changes) error {
	state, undo := s.state, func() {}
	if ch.Full != nil {
		state = ch.Full
		state.apply(ch)
	} else {
		undo = state.apply(ch)
	}
	state.Version = CurrentVersion
	if state.Claims == nil {
		state.Claims = map[string]*Claim{}
	}
	data, sum, err := encodeSum(state, s.seq+1)
	if err != nil {
		undo()
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	// Only the agent reads it; it holds pod and claim names.
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		undo()
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	target := slotPaths(s.path)[s.next]
	if err := writeInPlace(target, data); err != nil {
		// The file is torn or empty now; the other still holds the newest
		// snapshot, so the next save writes this one again.
		undo()
		s.snapshotNext = true
		return fmt.Errorf("save checkpoint %s: %w", target, err)
	}
	s.state = state
	s.seq++
	s.next = 1 - s.next
	s.last = data
	s.haveBase, s.baseSeq, s.baseSum, s.baseBytes = true, s.seq, sum, len(data)
	// The log on disk follows the previous snapshot now: ignored at Load,
	// and started again at the next append.
	s.logOK, s.logEnd, s.cut, s.snapshotNext = false, 0, false, false
	return nil
}

// Mirror leaves the newest state in both snapshot files and removes the
// log, for a graceful stop: an agent from before the log, should the node
// be downgraded to one, reads the snapshots only, and one from before the
// two files only the first, which may be a save behind. The state in the
// log is written as a snapshot first.
func (s *Store) Mirror() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != nil && (s.last == nil || s.snapshotNext || !s.haveBase || s.seq != s.baseSeq) {
		if err := s.snapshot(&Changes{BootID: s.state.BootID, PartitionModeOn: s.state.PartitionModeOn}); err != nil {
			return fmt.Errorf("mirror checkpoint: %w", err)
		}
	}
	if s.last == nil {
		return nil
	}
	target := slotPaths(s.path)[s.next]
	if err := writeInPlace(target, s.last); err != nil {
		return fmt.Errorf("mirror checkpoint to %s: %w", target, err)
	}
	if err := os.Remove(logPath(s.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mirror checkpoint: remove the log: %w", err)
	}
	s.logOK, s.logEnd, s.cut = false, 0, false
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
