package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// A claim that asked for an NCCL topology file (ClaimDevice.NCCLTopoFile,
// docs/training.md) gets, in its spec, one more claim-level device that
// mounts the file (the claims package builds it, nccl.go there); the
// writer keeps the file (ClaimSpec.File).
//
// The file lives in a directory of its own under the spec directory,
// <spec-dir>/k8s.gpu.tessera.dev-nccl-topo/<claim UID>.xml:
//   - it is the agent's already: the DaemonSet mounts the spec directory
//     at the same path on host and agent, so the path written into the
//     spec is the path the runtime bind-mounts, and no new host mount is
//     needed;
//   - it is on tmpfs (/var/run) like the spec, so a reboot takes both and
//     a spec is never found without its file; the spec rewritten from the
//     checkpoint writes the file again (claims' ensureSpec);
//   - CDI runtimes read only *.json and *.yaml files at the top of a spec
//     directory and watch only that level (fsnotify is not recursive), so
//     a file in a subdirectory is neither parsed as a spec nor makes the
//     runtimes reload their specs on every prepare.
//
// The file is written before the spec and removed after it (WriteClaim,
// RemoveClaimSpec): a spec on disk, which is what prepared means to the
// runtime, always finds its file whole (written atomically). A file whose
// spec is gone is the start-up sweep's (RemoveOrphanTopologyFiles) or the
// next unprepare's.

const (
	// ncclTopoDirName is the topology files' directory in the spec dir.
	ncclTopoDirName = Vendor + "-nccl-topo"
	ncclTopoFileExt = ".xml"
)

// TopologyPath is the host file holding the claim's NCCL topology file.
func (w *Writer) TopologyPath(claimUID string) string {
	return filepath.Join(w.specDir, ncclTopoDirName, claimUID+ncclTopoFileExt)
}

// writeTopology writes the claim's file atomically: a runtime that mounts
// it sees the old file or the new one, never part of one.
func (w *Writer) writeTopology(claimUID string, xml []byte) error {
	dir := filepath.Join(w.specDir, ncclTopoDirName)
	if err := os.MkdirAll(dir, specDirMode); err != nil {
		return fmt.Errorf("NCCL topology file: %w", err)
	}
	if err := fsutil.WriteFileAtomic(w.TopologyPath(claimUID), xml, specFileMode); err != nil {
		return fmt.Errorf("NCCL topology file: %w", err)
	}
	return nil
}

// removeTopology deletes the claim's file; a missing one (a claim that
// never had one, or a removal run again) is not an error.
func (w *Writer) removeTopology(claimUID string) error {
	err := os.Remove(w.TopologyPath(claimUID))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("remove NCCL topology file of claim %s: %w", claimUID, err)
}

// TopologyExists reports whether the claim's topology file is on disk.
func (w *Writer) TopologyExists(claimUID string) bool {
	_, err := os.Stat(w.TopologyPath(claimUID))
	return err == nil
}

// RemoveOrphanTopologyFiles removes, at start, the topology files (and the
// temp files of writes cut short) of claims keep does not name: a crash
// between a plain claim's file and its spec, or between its spec's
// removal and the file's, leaves one no entry owns.
func (w *Writer) RemoveOrphanTopologyFiles(keep func(claimUID string) bool) ([]string, error) {
	dir := filepath.Join(w.specDir, ncclTopoDirName)
	if err := fsutil.RemoveAllTemps(dir, "*"+ncclTopoFileExt); err != nil {
		return nil, fmt.Errorf("NCCL topology files: %w", err)
	}
	names, err := fsutil.ListNames(dir, ncclTopoFileExt)
	if err != nil {
		return nil, fmt.Errorf("NCCL topology files: %w", err)
	}
	var removed []string
	for _, name := range names {
		uid := strings.TrimSuffix(name, ncclTopoFileExt)
		if keep(uid) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("NCCL topology files: %w", err)
		}
		removed = append(removed, uid)
	}
	return removed, nil
}
