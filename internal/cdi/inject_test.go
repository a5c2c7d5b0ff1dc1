package cdi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

var (
	nvidiaCommon = []string{"/dev/nvidia-uvm c 510:0", "/dev/nvidia-uvm-tools c 510:1", "/dev/nvidiactl c 195:255"}
	amdCommon    = []string{"/dev/kfd c 235:0"}
)

func commonFor(v inventory.Vendor) []string {
	if v == inventory.VendorNVIDIA {
		return nvidiaCommon
	}
	return amdCommon
}

func nodeStrings(ns []node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.String()
	}
	return out
}

func sortedUnion(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestInjectSimNumbers writes claims with simulator device numbers (host
// nodes do not exist) and resolves them with the real CDI library.
func TestInjectSimNumbers(t *testing.T) {
	eight := make([]ClaimDevice, 8)
	eightNodes := make([][]string, 8)
	var eightUUIDs []string
	for i := range eight {
		eight[i] = dev(i, nvidiaGPU(i), nil)
		eightNodes[i] = []string{fmt.Sprintf("/dev/nvidia%d c 195:%d", i, i)}
		eightUUIDs = append(eightUUIDs, nvidiaGPU(i).UUID)
	}
	amdPart := &inventory.Partition{Kind: inventory.PartitionXCP, Profile: "CPX", UUID: "amd-0-xcp-1", Minor: 9, RenderMinor: 137}

	tests := []struct {
		name string
		devs []ClaimDevice
		// wantNodes are each device's own nodes; its vendor's common nodes
		// are added by the test.
		wantNodes [][]string
		wantEnv   []string
	}{
		{
			name:      "one NVIDIA GPU",
			devs:      []ClaimDevice{dev(0, nvidiaGPU(0), nil)},
			wantNodes: [][]string{{"/dev/nvidia0 c 195:0"}},
			wantEnv:   []string{"NVIDIA_VISIBLE_DEVICES=" + nvidiaGPU(0).UUID},
		},
		{
			name:      "eight NVIDIA GPUs",
			devs:      eight,
			wantNodes: eightNodes,
			wantEnv:   []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(eightUUIDs, ",")},
		},
		{
			// gi access = 3 + 2*135 + 3*9 = 300, ci access = 300 + 1 + 0.
			name:      "MIG partition",
			devs:      []ClaimDevice{dev(0, nvidiaGPU(2), migPartition(3, 0))},
			wantNodes: [][]string{{"/dev/nvidia2 c 195:2", "/dev/nvidia-caps/nvidia-cap300 c 511:300", "/dev/nvidia-caps/nvidia-cap301 c 511:301"}},
			wantEnv:   []string{"NVIDIA_VISIBLE_DEVICES=" + migPartition(3, 0).UUID},
		},
		{
			// Two instances of one parent share /dev/nvidia2, given once.
			name: "two MIG partitions of one GPU",
			devs: []ClaimDevice{dev(0, nvidiaGPU(2), migPartition(3, 0)), dev(1, nvidiaGPU(2), migPartition(5, 1))},
			wantNodes: [][]string{
				{"/dev/nvidia2 c 195:2", "/dev/nvidia-caps/nvidia-cap300 c 511:300", "/dev/nvidia-caps/nvidia-cap301 c 511:301"},
				{"/dev/nvidia2 c 195:2", "/dev/nvidia-caps/nvidia-cap318 c 511:318", "/dev/nvidia-caps/nvidia-cap320 c 511:320"},
			},
			wantEnv: []string{"NVIDIA_VISIBLE_DEVICES=" + migPartition(3, 0).UUID + "," + migPartition(5, 1).UUID},
		},
		{
			name:      "AMD GPU",
			devs:      []ClaimDevice{dev(0, amdGPU(1), nil)},
			wantNodes: [][]string{{"/dev/dri/renderD129 c 226:129", "/dev/dri/card1 c 226:1"}},
		},
		{
			// A compute partition has its own DRM nodes, not the parent's.
			name:      "AMD partition",
			devs:      []ClaimDevice{dev(0, amdGPU(0), amdPart)},
			wantNodes: [][]string{{"/dev/dri/renderD137 c 226:137", "/dev/dri/card9 c 226:9"}},
		},
		{
			name:      "mixed NVIDIA and AMD",
			devs:      []ClaimDevice{dev(0, nvidiaGPU(0), nil), dev(1, amdGPU(1), nil), dev(2, nvidiaGPU(1), nil)},
			wantNodes: [][]string{{"/dev/nvidia0 c 195:0"}, {"/dev/dri/renderD129 c 226:129", "/dev/dri/card1 c 226:1"}, {"/dev/nvidia1 c 195:1"}},
			wantEnv:   []string{"NVIDIA_VISIBLE_DEVICES=" + nvidiaGPU(0).UUID + "," + nvidiaGPU(1).UUID},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, dir := newTestWriter(t, simNumbers)
			ids, err := writeSpec(w, ClaimRef{UID: uidA, Namespace: "ns", Name: "claim"}, tt.devs)
			if err != nil {
				t.Fatalf("WriteClaimSpec: %v", err)
			}
			if len(ids) != len(tt.devs) {
				t.Fatalf("got IDs for %d devices, want %d", len(ids), len(tt.devs))
			}
			for i, l := range ids {
				wantOwn := fmt.Sprintf("%s/%s=%s-%d-%s", Vendor, Class, uidA, i, tt.devs[i].Device)
				wantCommon := fmt.Sprintf("%s/%s=%s-common-%s", Vendor, Class, uidA, tt.devs[i].GPU.Vendor)
				if !slices.Equal(l, []string{wantOwn, wantCommon}) {
					t.Errorf("device %d IDs = %v, want [%s %s]", i, l, wantOwn, wantCommon)
				}
			}

			// The whole claim in one container. The common IDs come once
			// per device: the runtime must still give each node once.
			all, err := inject(t, dir, flatten(ids)...)
			if err != nil {
				t.Fatalf("InjectDevices: %v", err)
			}
			var want [][]string
			for i, d := range tt.devs {
				want = append(want, tt.wantNodes[i], commonFor(d.GPU.Vendor))
			}
			assertNodes(t, all, sortedUnion(want...))
			if got := envOf(all); !slices.Equal(got, tt.wantEnv) {
				t.Errorf("env = %q, want %q", got, tt.wantEnv)
			}

			// Each device alone, as for a container that references only
			// that device's request: it still gets its vendor's common
			// nodes, and nothing of another vendor.
			for i, d := range tt.devs {
				one, err := inject(t, dir, ids[i]...)
				if err != nil {
					t.Fatalf("InjectDevices(device %d): %v", i, err)
				}
				assertNodes(t, one, sortedUnion(tt.wantNodes[i], commonFor(d.GPU.Vendor)))
				wantEnv := tt.wantEnv
				if d.GPU.Vendor != inventory.VendorNVIDIA {
					wantEnv = nil
				}
				if got := envOf(one); !slices.Equal(got, wantEnv) {
					t.Errorf("device %d alone: env = %q, want %q", i, got, wantEnv)
				}
			}
		})
	}
}

// assertNodes checks the container's device nodes and that the cgroup
// allows each of them.
func assertNodes(t *testing.T, spec *oci.Spec, want []string) {
	t.Helper()
	got := nodeStrings(devicesOf(t, spec))
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("device nodes:\n got %q\nwant %q", got, want)
	}
	allowed := allowedOf(spec)
	for _, n := range devicesOf(t, spec) {
		if !slices.Contains(allowed, node{Type: n.Type, Major: n.Major, Minor: n.Minor}) {
			t.Errorf("cgroup does not allow %s", n)
		}
	}
}

func mkdev(major, minor int64) int {
	// Linux's encoding of dev_t (see makedev(3)).
	return int((minor & 0xff) | ((major & 0xfff) << 8) | ((minor &^ 0xff) << 12) | ((major &^ 0xfff) << 32))
}

// TestInjectHostNumbers covers real hardware: no DeviceNumbers, so the
// runtime stats the host nodes under DevRoot. As root the test creates real
// character nodes; without root it checks that the runtime fails clearly
// instead of handing out a device it cannot see.
func TestInjectHostNumbers(t *testing.T) {
	devs := []ClaimDevice{dev(0, nvidiaGPU(2), migPartition(3, 0)), dev(1, amdGPU(1), nil)}
	// Host numbers, deliberately unlike simNumbers.
	hostNodes := map[string][2]int64{
		"nvidia2":                   {195, 2},
		"nvidiactl":                 {195, 255},
		"nvidia-uvm":                {508, 0},
		"nvidia-uvm-tools":          {508, 1},
		"nvidia-caps/nvidia-cap300": {237, 300},
		"nvidia-caps/nvidia-cap301": {237, 301},
		"dri/renderD129":            {226, 129},
		"dri/card1":                 {226, 1},
		"kfd":                       {234, 0},
	}

	devRoot := t.TempDir()
	specDir := t.TempDir()
	w, err := NewWriter(Options{SpecDir: specDir, DevRoot: devRoot})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := writeSpec(w, ClaimRef{UID: uidA, Namespace: "ns", Name: "c"}, devs)
	if err != nil {
		t.Fatal(err)
	}

	// Before any node exists the runtime must refuse, naming the node.
	if _, err := inject(t, specDir, flatten(ids)...); err == nil || !strings.Contains(err.Error(), "failed to stat CDI host device") {
		t.Fatalf("inject without host nodes: err = %v, want a stat error", err)
	}

	var want []string
	root := true
	for rel, n := range hostNodes {
		p := filepath.Join(devRoot, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, mkdev(n[0], n[1])); err != nil {
			if errors.Is(err, syscall.EPERM) {
				root = false
				break
			}
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("/dev/%s c %d:%d", rel, n[0], n[1]))
	}
	if !root {
		t.Log("not allowed to mknod; checked only the stat failure")
		return
	}
	sort.Strings(want)
	s, err := inject(t, specDir, flatten(ids)...)
	if err != nil {
		t.Fatalf("InjectDevices: %v", err)
	}
	assertNodes(t, s, want)
}

// A host path that exists but is no device node (a simulator tree without
// numbers) must not resolve.
func TestInjectRegularFileWithoutNumbers(t *testing.T) {
	devRoot := t.TempDir()
	specDir := t.TempDir()
	for _, rel := range []string{"dri/renderD129", "dri/card1", "kfd"} {
		p := filepath.Join(devRoot, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := NewWriter(Options{SpecDir: specDir, DevRoot: devRoot})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := writeSpec(w, ClaimRef{UID: uidA}, []ClaimDevice{dev(0, amdGPU(1), nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inject(t, specDir, ids[0]...); err == nil || !strings.Contains(err.Error(), "not a device node") {
		t.Fatalf("err = %v, want a not-a-device-node error", err)
	}
}
