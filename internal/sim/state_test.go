package sim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/host"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// partitionUUIDs lists every partition UUID of the backend, GPU by GPU.
func partitionUUIDs(t *testing.T, b *Backend) []string {
	t.Helper()
	var out []string
	for _, g := range discover(t, b).GPUs {
		for _, p := range g.Partitions {
			out = append(out, p.UUID)
		}
	}
	return out
}

func TestStatePersistsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	m := mustProfile(t, "dgx-h100-mig")
	dir := t.TempDir()
	b1, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	g5, g6 := m.Node.GPUs[5].UUID, m.Node.GPUs[6].UUID
	// GPU 5 is not in MIG mode; GPU 6 is and is full: free a slot first.
	if _, err := b1.CreatePartition(ctx, g5, "1g.10gb", inventory.Placement{}); err == nil {
		t.Fatal("carved a GPU with MIG disabled")
	}
	gone := m.Node.GPUs[6].Partitions[3].UUID
	if err := b1.DestroyPartition(ctx, g6, gone); err != nil {
		t.Fatal(err)
	}
	made, err := b1.CreatePartition(ctx, g6, "1g.10gb+me", inventory.Placement{Start: 3})
	if err != nil {
		t.Fatal(err)
	}
	before := partitionUUIDs(t, b1)

	// A new process, same host boot: the same partitions, like MIG instances
	// across a driver restart.
	b2, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if after := partitionUUIDs(t, b2); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("partitions changed across a restart:\n%v\n%v", before, after)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dev", capNode(6, made.GPUInstanceID))); err != nil {
		t.Errorf("restored partition has no cap node: %v", err)
	}
	// The restored state still obeys the rules.
	if _, err := b2.CreatePartition(ctx, g6, "1g.10gb+me", inventory.Placement{Start: 3}); err == nil {
		t.Error("restored state lets a slot be used twice")
	}

	// A reboot: the machine file's partitions come back.
	b3, err := New(m, dir, WithBootID("boot-2"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var fromFile []string
	for _, g := range m.Node.GPUs {
		for _, p := range g.Partitions {
			fromFile = append(fromFile, p.UUID)
		}
	}
	if got := partitionUUIDs(t, b3); strings.Join(got, ",") != strings.Join(fromFile, ",") {
		t.Errorf("after a reboot got %v, want the machine file's %v", got, fromFile)
	}
	if !contains(partitionUUIDs(t, b3), gone) || contains(partitionUUIDs(t, b3), made.UUID) {
		t.Error("reboot did not reset the partitions")
	}
	if _, err := os.Lstat(filepath.Join(dir, "dev", capNode(6, made.GPUInstanceID))); err != nil {
		// Slot 3 holds the file's 1g.10gb again: same GI id, so the node exists.
		t.Errorf("cap node of the restored instance missing: %v", err)
	}

	// After a reboot a new partition gets a new UUID even at the same slot.
	if err := b3.DestroyPartition(ctx, g6, gone); err != nil {
		t.Fatal(err)
	}
	again, err := b3.CreatePartition(ctx, g6, "1g.10gb+me", inventory.Placement{Start: 3})
	if err != nil {
		t.Fatal(err)
	}
	if again.UUID == made.UUID {
		t.Error("a partition re-created after a reboot reused a UUID")
	}
	assertNoTempFiles(t, dir)
}

func TestStateResetCases(t *testing.T) {
	m := mustProfile(t, "dgx-h100-mig")
	valid := func(t *testing.T, dir string) stateDoc {
		b, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.DestroyPartition(context.Background(), m.Node.GPUs[6].UUID, m.Node.GPUs[6].Partitions[0].UUID); err != nil {
			t.Fatal(err)
		}
		var doc stateDoc
		data, _ := os.ReadFile(filepath.Join(dir, stateFileName))
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	cases := []struct {
		name   string
		mangle func(dir string, doc *stateDoc) []byte
	}{
		{"corrupt JSON", func(string, *stateDoc) []byte { return []byte(`{"version": 1, "gpus": [`) }},
		{"empty file", func(string, *stateDoc) []byte { return nil }},
		{"other version", func(_ string, d *stateDoc) []byte { d.Version = 99; return mustJSON(d) }},
		{"other machine", func(_ string, d *stateDoc) []byte { d.Machine = "dgx-a100"; return mustJSON(d) }},
		{"other node", func(_ string, d *stateDoc) []byte { d.NodeName = "node-b"; return mustJSON(d) }},
		{"GPU missing", func(_ string, d *stateDoc) []byte { d.GPUs = d.GPUs[:7]; return mustJSON(d) }},
		{"overlapping partitions", func(_ string, d *stateDoc) []byte {
			d.GPUs[7].Partitions = append(d.GPUs[7].Partitions, inventory.Partition{Profile: "1g.10gb", Placement: inventory.Placement{Start: 5, Size: 1}, UUID: "MIG-c"})
			return mustJSON(d)
		}},
		{"partitions on a GPU without MIG mode", func(_ string, d *stateDoc) []byte {
			d.GPUs[0].Partitions = []inventory.Partition{{Profile: "3g.40gb", Placement: inventory.Placement{Start: 0, Size: 4}, UUID: "MIG-a"}}
			return mustJSON(d)
		}},
		{"unknown time-slice interval", func(_ string, d *stateDoc) []byte {
			d.GPUs[0].TimeSlice = "Forever"
			return mustJSON(d)
		}},
		{"duplicate UUID", func(_ string, d *stateDoc) []byte {
			d.GPUs[7].Partitions[1].UUID = d.GPUs[7].Partitions[0].UUID
			return mustJSON(d)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			doc := valid(t, dir)
			if err := os.WriteFile(filepath.Join(dir, stateFileName), tc.mangle(dir, &doc), 0o644); err != nil {
				t.Fatal(err)
			}
			b, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
			if err != nil {
				t.Fatalf("a bad state file made New fail: %v", err)
			}
			if got := len(discover(t, b).GPUs[6].Partitions); got != 7 {
				t.Errorf("GPU 6 has %d partitions, want the machine file's 7", got)
			}
			// The bad file was replaced by a good one.
			data, _ := os.ReadFile(filepath.Join(dir, stateFileName))
			var fresh stateDoc
			if err := json.Unmarshal(data, &fresh); err != nil || fresh.BootID != "boot-1" || fresh.Machine != "dgx-h100-mig" {
				t.Errorf("state not rewritten: %v %+v", err, fresh)
			}
		})
	}
}

func TestRealBootID(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(mustProfile(t, "t4-2"), dir, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, stateFileName))
	want, _ := host.BootID()
	if !strings.Contains(string(data), want) {
		t.Errorf("state does not carry the host boot id %s", want)
	}
}

func capNode(gpuMinor, gi int) string {
	n, _ := migCaps(gpuMinor, gi, 0)
	return capPath(n)
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".state-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestInUsePartitionRefusesDestroy: a partition listed in a GPU's inUse
// (a process outside the driver holds it) cannot be destroyed, across
// restarts, while its neighbours can; another boot clears it with the
// partitions.
func TestInUsePartitionRefusesDestroy(t *testing.T) {
	ctx := context.Background()
	m := mustProfile(t, "dgx-h100-mig")
	dir := t.TempDir()
	if _, err := New(m, dir, WithBootID("boot-1"), testLogger(t)); err != nil {
		t.Fatal(err)
	}
	g6 := m.Node.GPUs[6]
	held, free := g6.Partitions[0].UUID, g6.Partitions[1].UUID
	var doc stateDoc
	data, _ := os.ReadFile(filepath.Join(dir, stateFileName))
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc.GPUs[6].InUse = []string{held}
	if err := os.WriteFile(filepath.Join(dir, stateFileName), mustJSON(&doc), 0o644); err != nil {
		t.Fatal(err)
	}

	for restart := range 2 {
		b, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		err = b.DestroyPartition(ctx, g6.UUID, held)
		if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), held) {
			t.Fatalf("start %d: destroy of the held partition: %v, want an in-use error naming it", restart, err)
		}
		if restart == 0 {
			if err := b.DestroyPartition(ctx, g6.UUID, free); err != nil {
				t.Fatalf("destroy of a free neighbour: %v", err)
			}
		}
	}
	b, err := New(m, dir, WithBootID("boot-2"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DestroyPartition(ctx, g6.UUID, held); err != nil {
		t.Errorf("after a reboot the partition is the machine file's again and free: %v", err)
	}
}
