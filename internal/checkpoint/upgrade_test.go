package checkpoint

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// A checkpoint written by the first release (version 1, placements with
// Go's field names) loads with every claim and placement, and is saved back
// in the current format.
func TestUpgradeFromV1(t *testing.T) {
	payload := []byte(`{"version":1,"bootID":"b","claims":{"uid-a":{"uid":"uid-a","namespace":"ns","name":"mig","state":"PrepareCompleted",` +
		`"devices":[{"request":"gpu","pool":"n","device":"gpu-7-mig-3g-40gb-4","gpuUUID":"GPU-7","partitionUUID":"MIG-1","createdPartition":true,"profile":"3g.40gb","placement":{"Start":4,"Size":4}}],` +
		`"updated":"2026-01-01T00:00:00Z"}},"partitionModeOn":["GPU-7"]}`)
	data, err := json.Marshal(envelope{Checksum: checksum(payload), Checkpoint: payload})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(path)
	cp, err := s.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	d := cp.Claims["uid-a"].Devices[0]
	if cp.Version != CurrentVersion || d.Placement == nil || *d.Placement != (inventory.Placement{Start: 4, Size: 4}) || !d.CreatedPartition || cp.PartitionModeOn[0] != "GPU-7" {
		t.Fatalf("upgraded checkpoint %+v, device %+v", cp, d)
	}
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	// The v1 file holds the newest state, so the save went to the other.
	saved, _ := os.ReadFile(path + ".1")
	var env envelope
	if err := json.Unmarshal(saved, &env); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.Checkpoint); err != nil {
		t.Fatal(err)
	}
	if got := compact.String(); !strings.Contains(got, `"placement":{"start":4,"size":4}`) || !strings.Contains(got, `"version":2`) {
		t.Errorf("saved %s", got)
	}
	again, err := s.Load()
	if err != nil || *again.Claims["uid-a"].Devices[0].Placement != *d.Placement {
		t.Errorf("reload: %v %+v", err, again)
	}
}

func TestUpgradeRefusesUnknown(t *testing.T) {
	for _, payload := range []string{`{"claims":{}}`, `{"version":0,"claims":{}}`, `{"version":99,"claims":{}}`, `{"version":1.5,"claims":{}}`} {
		if _, err := upgrade([]byte(payload)); err == nil {
			t.Errorf("%s upgraded", payload)
		}
	}
}
