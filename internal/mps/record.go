package mps

import (
	"fmt"
	"path/filepath"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// recordName is the record's file in <Root>/<id>.
const recordName = "record.json"

// record is what the manager wrote down about one daemon. Start writes it
// with no handle before launching (the intent) and again with the handle once the
// process exists.
type record struct {
	ID      string   `json:"id"`
	Devices []string `json:"devices"`
	// BootID is the host boot the record was written in: PIDs and start
	// times mean nothing in another one.
	BootID string `json:"bootID"`
	// Handle is the launcher's name for the daemon (its fields sit at the
	// top level: pid and startTime as records of a process always had).
	Handle
}

// readRecord reads the record of the daemon in dir; (nil, nil) when there
// is none.
func readRecord(dir string) (*record, error) {
	var r record
	found, err := fsutil.ReadJSON(filepath.Join(dir, recordName), &r)
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	if !found {
		return nil, nil
	}
	return &r, nil
}

// writeRecord replaces the record atomically: a crash leaves the old record
// or the new one, never half of one.
func writeRecord(dir string, r *record) error {
	if err := fsutil.WriteJSON(filepath.Join(dir, recordName), r, true, 0o644); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	return nil
}
