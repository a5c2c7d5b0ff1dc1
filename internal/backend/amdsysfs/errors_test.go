package amdsysfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

const node2 = "sys/class/kfd/kfd/topology/nodes/2"

// TestDegradedInput breaks one GPU of the real MI308X capture at a time:
// unidentifiable nodes are left out, others published with what was read.
func TestDegradedInput(t *testing.T) {
	tests := []struct {
		name      string
		breakTree func(t *testing.T, root string)
		gpus      int // cards published
		check     func(t *testing.T, root string)
	}{
		{"garbled properties leave the partition out", func(t *testing.T, root string) {
			writeFile(t, root, node2+"/properties", "simd_count eighty\n\x00\xff")
		}, 8, nil},
		{"missing mem_banks: the partition's memory unknown, and so the card's", func(t *testing.T, root string) {
			if err := os.RemoveAll(filepath.Join(root, node2, "mem_banks")); err != nil {
				t.Fatal(err)
			}
		}, 8, func(t *testing.T, root string) {
			g := discover(t, root).GPUs[0]
			if g.Partitions[0].MemoryBytes != 0 || g.Partitions[1].MemoryBytes == 0 || g.MemoryBytes != 0 {
				t.Errorf("partition memory %d, %d, card %d; want unknown, known, unknown", g.Partitions[0].MemoryBytes, g.Partitions[1].MemoryBytes, g.MemoryBytes)
			}
		}},
		{"unknown device id and no name: model unknown", func(t *testing.T, root string) {
			for _, n := range []string{"2", "3", "4", "5"} {
				p := filepath.Join(root, "sys/class/kfd/kfd/topology/nodes", n, "properties")
				b, _ := os.ReadFile(p)
				writeFile(t, root, "sys/class/kfd/kfd/topology/nodes/"+n+"/properties", string(replace(b, "device_id 29858", "device_id 4660")))
			}
		}, 8, func(t *testing.T, root string) {
			if m := discover(t, root).GPUs[0].Model; m != unknownModel {
				t.Errorf("model %q", m)
			}
		}},
		{"unknown device id with a KFD name: model from the name", func(t *testing.T, root string) {
			b, _ := os.ReadFile(filepath.Join(root, node2, "properties"))
			writeFile(t, root, node2+"/properties", string(replace(b, "device_id 29858", "device_id 4660")))
			writeFile(t, root, node2+"/name", "gfx942\n")
		}, 8, func(t *testing.T, root string) {
			if m := discover(t, root).GPUs[0].Model; m != "gfx942" {
				t.Errorf("model %q", m)
			}
		}},
		{"missing gpu_id leaves the node out", func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, node2, "gpu_id")); err != nil {
				t.Fatal(err)
			}
		}, 8, func(t *testing.T, root string) {
			if p := len(discover(t, root).GPUs[0].Partitions); p != 3 {
				t.Errorf("%d partitions, want 3", p)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, sharedMI308X)
			tc.breakTree(t, root)
			if n := discover(t, root); len(n.GPUs) != tc.gpus {
				t.Fatalf("%d GPUs, want %d", len(n.GPUs), tc.gpus)
			}
			if tc.check != nil {
				tc.check(t, root)
			}
		})
	}
}

func replace(b []byte, old, new string) []byte {
	s := string(b)
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return []byte(s[:i] + new + s[i+len(old):])
		}
	}
	return b
}

func TestNoTopology(t *testing.T) {
	if ok, _ := Detect(t.TempDir()); ok {
		t.Error("Detect found KFD in an empty dir")
	}
	if _, err := New(Options{SysfsRoot: t.TempDir()}); err == nil {
		t.Error("New accepted a root without KFD")
	}
	if ok, reason := Detect(sharedMI308X); !ok {
		t.Error(reason)
	}
}

func TestGenerationChangeRereads(t *testing.T) {
	root := copyTree(t, fixture("mi300x-8-spx"))
	b, err := New(Options{SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := b.Discover(ctx)
	if err != nil || len(n.GPUs) != 8 {
		t.Fatalf("%v, %d GPUs", err, len(n.GPUs))
	}
	// Hot-unplug the last GPU; without a generation change the cache holds.
	if err := os.RemoveAll(filepath.Join(root, "sys/class/kfd/kfd/topology/nodes/9")); err != nil {
		t.Fatal(err)
	}
	if n, _ = b.Discover(ctx); len(n.GPUs) != 8 {
		t.Fatalf("re-read without a generation change: %d GPUs", len(n.GPUs))
	}
	writeFile(t, root, "sys/class/kfd/kfd/topology/generation_id", "2\n")
	if g, _ := b.Generation(); g != "2" {
		t.Fatalf("Generation() = %q", g)
	}
	if n, _ = b.Discover(ctx); len(n.GPUs) != 7 {
		t.Fatalf("after generation change: %d GPUs, want 7", len(n.GPUs))
	}
}

func TestPartitionChangesNotSupported(t *testing.T) {
	b, err := New(Options{SysfsRoot: fixture("mi300x-8-cpx")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreatePartition(context.Background(), "x", "CPX", inventory.Placement{}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CreatePartition: %v", err)
	}
	if err := b.DestroyPartition(context.Background(), "x", "y"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("DestroyPartition: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.WatchHealth(ctx, nil); err != nil {
		t.Error(err)
	}
}

// An empty properties file reads like a CPU node's, which would make its GPU
// vanish without a word: it is left out and the reason reported.
func TestEmptyPropertiesReported(t *testing.T) {
	root := copyTree(t, sharedMI308X)
	writeFile(t, root, node2+"/properties", "")
	_, nodes, bad, err := readTopology(fsRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || !strings.Contains(bad[0].Error(), "properties give no simd_count") {
		t.Fatalf("bad nodes %v, want the emptied one reported", bad)
	}
	for _, n := range nodes {
		if n.GPUID != 0 && !n.isGPU() {
			t.Errorf("KFD node %d kept as a non-GPU", n.ID)
		}
	}
	if n := discover(t, root); len(n.GPUs) != 8 {
		t.Errorf("%d GPUs, want 8 (the other partitions of the card stay)", len(n.GPUs))
	}
}
