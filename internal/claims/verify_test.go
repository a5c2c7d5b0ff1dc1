package claims

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// Every write of this package's tests is checked: what the checkpoint on
// disk reads as (the newest snapshot and the log's records after it) is
// the whole state the manager published, so a change that forgot to mark
// the claim it changed (touch, keep) fails the test that made it.
func init() {
	verifyWrite = func(s *checkpoint.Store, whole *checkpoint.Checkpoint) {
		got, err := checkpoint.Read(s.Path())
		if err != nil {
			panic(fmt.Sprintf("checkpoint after a write: %v", err))
		}
		// The state as a save writes it and a load reads it back (times
		// without their monotonic reading, empty lists as none).
		dir, err := os.MkdirTemp("", "verify-write")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		p := filepath.Join(dir, "checkpoint.json")
		if err := checkpoint.NewStore(p).Save(whole); err != nil {
			panic(err)
		}
		want, err := checkpoint.Read(p)
		if err != nil {
			panic(err)
		}
		if !reflect.DeepEqual(got, want) {
			panic(fmt.Sprintf("the checkpoint on disk is not the state the manager published:\n disk %s\n want %s", dump(got), dump(want)))
		}
	}
}

func dump(cp *checkpoint.Checkpoint) string {
	s := fmt.Sprintf("boot %q modeOn %v", cp.BootID, cp.PartitionModeOn)
	for uid, c := range cp.Claims {
		s += fmt.Sprintf("\n   %s: %+v", uid, *c)
	}
	return s
}
