package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// Options configures a Writer.
type Options struct {
	// SpecDir is where spec files go; DefaultSpecDir when empty.
	SpecDir string
	// DevRoot is the host directory that plays /dev: "/dev" on hardware,
	// the simulator's tree otherwise. "/dev" when empty.
	DevRoot string
	// DeviceNumbers is backend.Backend.DeviceNumbers: given a node path
	// relative to /dev ("nvidia0", "dri/renderD128") it returns the numbers
	// to write into the spec. nil, or ok=false, leaves type and numbers out
	// so the runtime stats the host node.
	DeviceNumbers func(devPath string) (major, minor int64, ok bool)
	// VendorSpecDirs are searched for the node's own NVIDIA CDI spec
	// (kind nvidia.com/gpu). Where it names a claim's GPU, that device's ID
	// is returned too, so the driver's libraries reach the container. Empty
	// disables the lookup (the simulator has no vendor spec to find).
	VendorSpecDirs []string
}

// Writer writes and removes per-claim CDI specs. It holds no mutable state
// and is safe for concurrent use on different claims.
type Writer struct {
	specDir string
	devRoot string
	numbers func(string) (int64, int64, bool)
	vendor  []string
}

// Spec files are read by container runtimes (root) and by operators.
const (
	specFileMode = 0o644
	specDirMode  = 0o755
)

// NewWriter returns a Writer for o, creating SpecDir if it is missing.
func NewWriter(o Options) (*Writer, error) {
	w := &Writer{specDir: o.SpecDir, devRoot: o.DevRoot, numbers: o.DeviceNumbers, vendor: o.VendorSpecDirs}
	if w.specDir == "" {
		w.specDir = DefaultSpecDir
	}
	w.specDir = filepath.Clean(w.specDir)
	if w.devRoot == "" {
		w.devRoot = "/dev"
	}
	// CDI host paths are absolute; a relative root would resolve against
	// the runtime's working directory, not ours.
	if !filepath.IsAbs(w.devRoot) {
		return nil, fmt.Errorf("CDI device root %q is not an absolute path", w.devRoot)
	}
	w.devRoot = filepath.Clean(w.devRoot)
	if err := os.MkdirAll(w.specDir, specDirMode); err != nil {
		return nil, fmt.Errorf("create CDI spec dir: %w", err)
	}
	return w, nil
}

// SpecPath is the file holding the claim's spec.
func (w *Writer) SpecPath(claimUID string) string {
	return filepath.Join(w.specDir, specFilePrefix+claimUID+specFileExt)
}

// WriteClaim writes the claim's spec, built from s (buildSpec), replacing
// any earlier one, and returns per device (in input order) the CDI device
// IDs a container using that device must get: the device's own ID, then
// its vendor's common ID, then the claim-level devices it joins. Every
// device of a vendor carries the common ID, not only the first, since a
// container may reference just one request of the claim; a runtime given
// the common ID twice applies it idempotently (same env value, same nodes).
//
// Output is a pure function of the input, so preparing a claim again yields
// the same file and IDs. The spec is written only once it passes the CDI
// library's validation (validateSpec); on any error the previous spec, if
// any, is left untouched. s.File, when set, is written first (at
// TopologyPath), so that a spec on disk always finds its file; on an error
// after the file was written the file stays, and RemoveClaimSpec removes
// it with the spec.
func (w *Writer) WriteClaim(s ClaimSpec) ([][]string, error) {
	spec, ids, err := w.buildSpec(s)
	if err != nil {
		return nil, fmt.Errorf("CDI spec for claim %s: %w", s.Claim, err)
	}
	data, err := marshalSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI spec for claim %s: %w", s.Claim, err)
	}
	if err := validateSpec(spec, data, ids); err != nil {
		return nil, fmt.Errorf("CDI spec for claim %s: %w", s.Claim, err)
	}
	if s.File != nil {
		if err := w.writeTopology(s.Claim.UID, s.File); err != nil {
			return nil, fmt.Errorf("CDI spec for claim %s: %w", s.Claim, err)
		}
	}
	if err := fsutil.WriteFileAtomic(w.SpecPath(s.Claim.UID), data, specFileMode); err != nil {
		return nil, fmt.Errorf("CDI spec for claim %s: %w", s.Claim, err)
	}
	return ids, nil
}

// RemoveStaleTemps removes the temp files of claim specs whose write was
// cut short by a crash (start-up: no write is in flight then).
func (w *Writer) RemoveStaleTemps() error {
	return fsutil.RemoveAllTemps(w.specDir, specFilePrefix+"*"+specFileExt)
}

// RemoveClaimSpec deletes the claim's spec, then its NCCL topology file if
// it has one. A missing spec or file is not an error: unprepare may run
// again after a crash, and the file goes even when the spec went before.
// The temp file of a write the agent was killed in is RemoveStaleTemps' at
// the next start (no runtime loads it): looking for it here read the whole
// spec directory on every unprepare.
func (w *Writer) RemoveClaimSpec(claimUID string) error {
	if err := validateClaimUID(claimUID); err != nil {
		return err
	}
	err := os.Remove(w.SpecPath(claimUID))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("remove CDI spec of claim %s: %w", claimUID, err)
	default:
		// Make the removal durable: a spec resurrected by a crash would
		// make recovery believe the claim is still prepared.
		if err := fsutil.SyncDir(w.specDir); err != nil {
			return fmt.Errorf("remove CDI spec of claim %s: %w", claimUID, err)
		}
	}
	// The file's removal is not synced: a file resurrected without its
	// spec is mounted by no one, and the start-up sweep removes it.
	return w.removeTopology(claimUID)
}
