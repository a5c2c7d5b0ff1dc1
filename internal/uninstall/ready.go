package uninstall

import (
	"fmt"
	"os"
	"path/filepath"
)

// MarkDone writes the marker Ready checks, in dir (the cleanup pod's own
// emptyDir), with the report's summary.
func MarkDone(dir string, r *Report) error {
	data := fmt.Sprintf("destroyed %d partitions, MIG mode off on %d GPUs, removed %q\n", len(r.Destroyed), len(r.ModeOff), r.Removed)
	if err := os.WriteFile(filepath.Join(dir, "done"), []byte(data), 0o644); err != nil {
		return fmt.Errorf("mark the node clean: %w", err)
	}
	return nil
}

// Ready is nil once MarkDone wrote its marker in dir.
func Ready(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		return fmt.Errorf("the node is not clean yet: %w", err)
	}
	return nil
}
