package inspect

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.txt from the current output")

// golden compares got with testdata/golden/name.txt, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/inspect -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test ./pkg/inspect -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func load(t *testing.T, files ...string) *Snapshot {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("testdata", f))
	}
	s, err := LoadFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestInventoryGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  []string
		nodes  []string
		output string
		edit   func(*Snapshot)
	}{
		{name: "inventory-dgx-h100", files: []string{"dgx-h100.yaml"}},
		{name: "inventory-a100-pcie-pairs", files: []string{"a100-pcie-pairs.yaml"}},
		{name: "inventory-mi300x-8", files: []string{"mi300x-8.yaml"}},
		{name: "inventory-mixed-inference", files: []string{"mixed-inference.yaml"}},
		{name: "inventory-dgx-h100-mig-static", files: []string{"dgx-h100-mig.yaml"}},
		{name: "inventory-dgx-h100-dynamic", files: []string{"dgx-h100-dynamic.yaml"}},
		{name: "inventory-dgx-h100-dynamic-half-full", files: []string{"dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml"}},
		{name: "inventory-dgx-h100-dynamic-half-full-wide", files: []string{"dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml"}, output: OutputWide},
		{name: "inventory-dgx-h100-dynamic-half-full-json", files: []string{"dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml"}, output: OutputJSON},
		{name: "inventory-l4-4-capacity-wide", files: []string{"l4-4-capacity.yaml", "l4-4-capacity-claims.yaml"}, output: OutputWide},
		{name: "inventory-l4-4-capacity-yaml", files: []string{"l4-4-capacity.yaml", "l4-4-capacity-claims.yaml"}, output: OutputYAML},
		{
			name:  "inventory-fleet",
			files: []string{"dgx-h100.yaml", "a100-pcie-pairs.yaml", "mi300x-8.yaml", "mixed-inference.yaml", "dgx-h100-mig.yaml", "dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml", "l4-4-capacity.yaml", "l4-4-capacity-claims.yaml"},
		},
		{
			name:  "inventory-fleet-two-nodes",
			files: []string{"dgx-h100.yaml", "mixed-inference.yaml", "l4-4-capacity.yaml", "l4-4-capacity-claims.yaml"},
			nodes: []string{"l4-0", "mixed-0"},
		},
		{
			// Health: taints as the health tracker publishes them.
			name: "inventory-dgx-h100-tainted", files: []string{"dgx-h100.yaml"},
			edit: func(s *Snapshot) {
				taint(s, "gpu-3", resourceapi.DeviceTaint{Key: "gpu.tessera.dev/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute})
				taint(s, "gpu-5", resourceapi.DeviceTaint{Key: "gpu.tessera.dev/degrading", Value: "ecc-sbe", Effect: resourceapi.DeviceTaintEffectNone})
				taint(s, "gpu-5", resourceapi.DeviceTaint{Key: "gpu.tessera.dev/row-remap", Value: "pending", Effect: resourceapi.DeviceTaintEffectNoSchedule})
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := load(t, tc.files...)
			if tc.edit != nil {
				tc.edit(s)
			}
			inv, err := BuildInventory(s, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := PrintInventory(&b, inv, tc.output); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
		})
	}
}

// taint adds a taint to every device named device.
func taint(s *Snapshot, device string, tn resourceapi.DeviceTaint) {
	for i := range s.Slices {
		for j := range s.Slices[i].Spec.Devices {
			if d := &s.Slices[i].Spec.Devices[j]; d.Name == device {
				d.Taints = append(d.Taints, tn)
			}
		}
	}
}

func TestTopoGolden(t *testing.T) {
	for _, tc := range []struct {
		name, node string
		files      []string
	}{
		{"topo-dgx-h100", "dgx-h100-0", []string{"dgx-h100.yaml"}},
		{"topo-a100-pcie-pairs", "a100-0", []string{"a100-pcie-pairs.yaml"}},
		{"topo-mi300x-8", "mi300x-0", []string{"mi300x-8.yaml"}},
		{"topo-mixed-inference", "mixed-0", []string{"mixed-inference.yaml"}},
		{"topo-dgx-h100-mig-static", "dgx-h100-mig-0", []string{"dgx-h100-mig.yaml"}},
		{"topo-dgx-h100-dynamic", "dgx-h100-dyn", []string{"dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml"}},
		{"topo-l4-4-capacity", "l4-0", []string{"l4-4-capacity.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := BuildTopology(load(t, tc.files...), tc.node)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := PrintTopology(&b, topo); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
		})
	}
}
