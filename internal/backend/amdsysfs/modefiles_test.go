package amdsysfs

import (
	"context"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// discoverLogged is discover that also returns what the backend logged.
func discoverLogged(t *testing.T, root string) (*inventory.Node, string) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	b, err := New(Options{SysfsRoot: root, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n, logger.GetSink().(ktesting.Underlier).GetBuffer().String()
}

// TestBadModeFiles: a value amdgpu's partition-mode files or numa_node
// should never hold changes nothing it should not, and is logged naming
// the file; the GPU is still published, from what KFD says.
func TestBadModeFiles(t *testing.T) {
	const gpu0 = "sys/bus/pci/devices/0000:0c:00.0/"
	tests := []struct {
		name, fixture, file, content string
		log                          string // in the log
		check                        func(t *testing.T, g inventory.GPU)
	}{
		{name: "garbage compute mode: the mode follows the KFD nodes", fixture: "mi300x-8-spx", file: "current_compute_partition", content: "XYZ\n",
			log: `current_compute_partition holds \"XYZ\", not one of SPX, DPX, TPX, QPX, CPX`,
			check: func(t *testing.T, g inventory.GPU) {
				if g.Partitioning == nil || g.Partitioning.Profiles[0].Name != "SPX" {
					t.Errorf("partitioning %+v, want SPX", g.Partitioning)
				}
			}},
		{name: "compute mode contradicting KFD: KFD wins", fixture: "mi300x-8-spx", file: "current_compute_partition", content: "CPX\n",
			log: "current_compute_partition says CPX but KFD lists 1 partition(s) of this GPU: published as SPX",
			check: func(t *testing.T, g inventory.GPU) {
				if g.Partitioning.Profiles[0].Name != "SPX" || len(g.Partitions) != 0 {
					t.Errorf("profile %s with %d partitions, want SPX with none", g.Partitioning.Profiles[0].Name, len(g.Partitions))
				}
			}},
		{name: "garbage memory mode: unknown", fixture: "mi300x-8-cpx", file: "current_memory_partition", content: "NPS9\n",
			log: `current_memory_partition holds \"NPS9\", not one of NPS1, NPS2, NPS4, NPS8`,
			check: func(t *testing.T, g inventory.GPU) {
				if len(g.Partitions) != 8 || g.Partitions[0].MemoryPartitionMode != "" {
					t.Errorf("%d partitions, memory mode %q; want 8, unknown", len(g.Partitions), g.Partitions[0].MemoryPartitionMode)
				}
			}},
		{name: "unknown entries of a mode list are dropped", fixture: "mi300x-8-spx", file: "available_compute_partition", content: "SPX, WARP, CPX\n",
			log: `available_compute_partition lists [\"WARP\"], not among SPX, DPX, TPX, QPX, CPX: left out`,
			check: func(t *testing.T, g inventory.GPU) {
				if g.Partitioning == nil {
					t.Error("GPU no longer partition-capable")
				}
			}},
		{name: "garbage numa_node: KFD's CPU affinity", fixture: "mi300x-8-spx", file: "numa_node", content: "zero\n",
			log: `\"zero\" is not an integer: NUMA node from KFD's CPU affinity`,
			check: func(t *testing.T, g inventory.GPU) {
				if g.NUMANode < -1 {
					t.Errorf("NUMA node %d", g.NUMANode)
				}
			}},
		{name: "numa_node out of range", fixture: "mi300x-8-spx", file: "numa_node", content: "70000\n",
			log: "numa_node is 70000, not a NUMA node",
			check: func(t *testing.T, g inventory.GPU) {
				if g.NUMANode == 70000 {
					t.Error("NUMA node 70000 published")
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, fixture(tc.fixture))
			want, _ := discoverLogged(t, root)
			writeFile(t, root, gpu0+tc.file, tc.content)
			n, logs := discoverLogged(t, root)
			if len(n.GPUs) != len(want.GPUs) {
				t.Fatalf("%d GPUs, want %d", len(n.GPUs), len(want.GPUs))
			}
			if !strings.Contains(logs, tc.log) {
				t.Errorf("log lacks %q:\n%s", tc.log, logs)
			}
			g := findBus(t, n, "0000:0c:00.0")
			tc.check(t, g)
			// Every other GPU is as before.
			for i := range n.GPUs {
				if n.GPUs[i].PCIBusID != "0000:0c:00.0" && n.GPUs[i].NUMANode != want.GPUs[i].NUMANode {
					t.Errorf("GPU %s changed", n.GPUs[i].PCIBusID)
				}
			}
		})
	}
}

func findBus(t *testing.T, n *inventory.Node, bus string) inventory.GPU {
	t.Helper()
	for _, g := range n.GPUs {
		if g.PCIBusID == bus {
			return g
		}
	}
	t.Fatalf("no GPU %s", bus)
	return inventory.GPU{}
}
