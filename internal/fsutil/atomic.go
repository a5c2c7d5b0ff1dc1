// Package fsutil holds small file-system helpers shared by the node agent's
// durable state (CDI specs, checkpoint, and the JSON records of the
// simulator, the MPS daemons and the memory limit hook: jsonfile.go).
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a reader (a container
// runtime scanning the CDI spec directory, the agent after a crash) sees
// either the old file or the complete new one, never a partial write.
// The file gets exactly perm (the umask does not apply).
//
// The temporary file lives in path's directory, so the final rename stays on
// one file system and is atomic. Its name starts with "." and ends in
// ".tmp": CDI caches only load *.json and *.yaml, and the dot keeps it out
// of casual listings.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: create temp file: %w", path, err)
	}
	tmpPath := tmp.Name()
	renamed := false
	defer func() {
		if renamed {
			return
		}
		// Close may already have happened; the second close error is
		// irrelevant, the removal is what matters.
		_ = tmp.Close()
		if rmErr := os.Remove(tmpPath); rmErr != nil && !os.IsNotExist(rmErr) && err != nil {
			err = fmt.Errorf("%w (and removing temp file %s: %v)", err, tmpPath, rmErr)
		}
	}()

	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmpPath, err)
	}
	// CreateTemp makes the file 0600; set the final mode before the rename
	// so the file never appears under its real name with the wrong mode.
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: chmod: %w", tmpPath, err)
	}
	// Without this sync a crash after the rename can leave a complete
	// directory entry pointing at an empty or partial file.
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", tmpPath, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", tmpPath, err)
	}
	if err = os.Rename(tmpPath, path); err != nil {
		return fmt.Errorf("write %s: rename: %w", path, err)
	}
	renamed = true
	// The rename itself is only durable once the directory is synced.
	if err = SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in
// it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s for fsync: %w", dir, err)
	}
	syncErr := d.Sync()
	closeErr := d.Close()
	if syncErr != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, syncErr)
	}
	if closeErr != nil {
		return fmt.Errorf("close dir %s: %w", dir, closeErr)
	}
	return nil
}

// RemoveTemps removes the temporary files WriteFileAtomic leaves behind
// for path when the process dies between creating and renaming one (a
// SIGKILL mid-write): they are never read, but they are litter no one else
// removes. Only the writer of path may call it (no write of path in flight).
func RemoveTemps(path string) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return removeMatching(dir, "."+base+".*.tmp")
}

// RemoveAllTemps removes the temporary files of every file in dir whose
// name matches pattern (a filepath.Match pattern of the final names), for
// a start-up sweep.
func RemoveAllTemps(dir, pattern string) error {
	return removeMatching(dir, "."+pattern+".*.tmp")
}

func removeMatching(dir, pattern string) error {
	matches, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return fmt.Errorf("temp files %s: %w", pattern, err)
	}
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove temp file: %w", err)
		}
	}
	return nil
}
