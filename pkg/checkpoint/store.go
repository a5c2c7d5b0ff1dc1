package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// The file is an envelope around the checkpoint so that a torn or edited
// file is detected, not half-trusted: JSON that parses is not enough.
type envelope struct {
	// Checksum is "sha256:<hex>" of the compact JSON of Checkpoint.
	Checksum   string          `json:"checksum"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

const checksumPrefix = "sha256:"

// Store reads and writes one checkpoint file. Its methods are serialized, so
// concurrent callers cannot interleave a save with the move-aside of a
// corrupt file.
type Store struct {
	path string
	mu   sync.Mutex
}

// NewStore returns a Store for the file at path.
func NewStore(path string) *Store {
	return &Store{path: path}
}

// Path is the checkpoint file's path.
func (s *Store) Path() string { return s.path }

// Load reads the checkpoint. A missing file gives an empty checkpoint.
//
// A file that is not a valid checkpoint (bad JSON, checksum mismatch,
// unknown version, inconsistent entries) is renamed to
// <path>.corrupt-<unix nanos> and Load returns an empty checkpoint with an
// error wrapping ErrCorrupt: the caller logs it and rebuilds from the CDI
// specs, instead of failing at every restart over the same file. Any other
// read failure returns a nil checkpoint and the error; the file may be fine,
// so the caller must not save over it.
func (s *Store) Load() (*Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	// A save the agent was killed in the middle of leaves a temp file;
	// Load runs at start, before any save.
	if err := fsutil.RemoveTemps(s.path); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", s.path, err)
	}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", s.path, err)
	}
	cp, err := decode(data)
	if err == nil {
		return cp, nil
	}
	aside := s.path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if rnErr := os.Rename(s.path, aside); rnErr != nil {
		// The next Save replaces the file anyway; only the evidence is lost.
		return New(), fmt.Errorf("%w: %s: %w (moving it aside failed: %v)", ErrCorrupt, s.path, err, rnErr)
	}
	return New(), fmt.Errorf("%w: %s: %w (moved to %s)", ErrCorrupt, s.path, err, aside)
}

// Read decodes the checkpoint at path without the agent's recovery (a bad
// file is an error and stays where it is): for tools and tests reading an
// agent's state. A missing file is an empty checkpoint.
func Read(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	cp, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return cp, nil
}

// Save writes cp atomically, in the current format version, creating the
// directory if needed, without fsync (fsutil.WriteFileUnsynced). A crash
// of the agent loses nothing: the page cache holds the file. What loses the
// page cache (a power loss, a kernel crash) reboots the node, and every
// partition, daemon and setting a claim held goes with it; the recovery
// that follows needs no particular version of the checkpoint: an older one,
// or one the checksum finds torn (then rebuilt from the CDI specs), serves
// as well as the newest. A claim missing from it is prepared from scratch
// when the kubelet asks again; one whose unprepare it lost is unconfirmed
// and yields its devices (pkg/claims).
func (s *Store) Save(cp *Checkpoint) error {
	if cp == nil {
		return fmt.Errorf("save checkpoint %s: nil checkpoint", s.path)
	}
	out := *cp // shallow: only Version changes, cp is not modified
	out.Version = CurrentVersion
	data, err := encode(&out)
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// Only the agent reads it; it holds pod and claim names.
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	if err := fsutil.WriteFileUnsynced(s.path, data, 0o600); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// encode renders cp as it is, Version included, inside its envelope.
func encode(cp *Checkpoint) ([]byte, error) {
	if err := cp.validate(); err != nil {
		return nil, err
	}
	if cp.Claims == nil {
		cp = &Checkpoint{Version: cp.Version, BootID: cp.BootID, Claims: map[string]*Claim{}}
	}
	// json.Marshal is deterministic (sorted map keys) and compact: its
	// output is the canonical form the checksum covers.
	payload, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	// Written as is, not indented: re-indenting the payload cost more than
	// encoding it, on every prepare, growing with the claims held (jq
	// reads it). decode compacts what it reads, so indented files of
	// earlier versions load too.
	sum := checksum(payload)
	data := make([]byte, 0, len(payload)+len(sum)+32)
	data = append(data, `{"checksum":"`...)
	data = append(data, sum...)
	data = append(data, `","checkpoint":`...)
	data = append(data, payload...)
	data = append(data, '}')
	return append(data, '\n'), nil
}

func checksum(compact []byte) string {
	sum := sha256.Sum256(compact)
	return checksumPrefix + hex.EncodeToString(sum[:])
}

// decode parses and verifies a checkpoint file.
func decode(data []byte) (*Checkpoint, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if !strings.HasPrefix(env.Checksum, checksumPrefix) || len(env.Checkpoint) == 0 {
		return nil, errors.New("no checksum or no checkpoint")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.Checkpoint); err != nil {
		return nil, fmt.Errorf("parse payload: %w", err)
	}
	if got := checksum(compact.Bytes()); got != env.Checksum {
		return nil, fmt.Errorf("checksum mismatch: file says %s, content has %s", env.Checksum, got)
	}
	payload, err := upgrade(compact.Bytes())
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(payload, &cp); err != nil {
		return nil, fmt.Errorf("parse payload: %w", err)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]*Claim{}
	}
	if err := cp.validate(); err != nil {
		return nil, err
	}
	return &cp, nil
}
