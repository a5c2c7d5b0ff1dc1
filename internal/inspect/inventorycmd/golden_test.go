package inventorycmd

import (
	"bytes"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
)

func TestInventoryGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  []string
		nodes  []string
		output string
		edit   func(*inspect.Snapshot)
	}{
		{name: "inventory-dgx-h100", files: []string{"dgx-h100.yaml"}},
		{name: "inventory-a100-pcie-pairs", files: []string{"a100-pcie-pairs.yaml"}},
		{name: "inventory-mi300x-8", files: []string{"mi300x-8.yaml"}},
		{name: "inventory-mi300x-8-dynamic", files: []string{"mi300x-8-dynamic.yaml", "mi300x-8-dynamic-claims.yaml"}},
		{name: "inventory-mixed-inference", files: []string{"mixed-inference.yaml"}},
		{name: "inventory-dgx-h100-mig-static", files: []string{"dgx-h100-mig.yaml"}},
		{name: "inventory-dgx-h100-dynamic", files: []string{"dgx-h100-dynamic.yaml"}},
		{name: "inventory-dgx-h100-dynamic-half-full", files: []string{"dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml"}},
		{name: "inventory-dgx-h100-dynamic-half-full-wide", files: []string{"dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml"}, output: inspect.OutputWide},
		{name: "inventory-dgx-h100-dynamic-half-full-json", files: []string{"dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml"}, output: inspect.OutputJSON},
		{name: "inventory-l4-4-capacity-wide", files: []string{"l4-4-capacity.yaml", "l4-4-capacity-claims.yaml"}, output: inspect.OutputWide},
		{name: "inventory-l4-4-capacity-yaml", files: []string{"l4-4-capacity.yaml", "l4-4-capacity-claims.yaml"}, output: inspect.OutputYAML},
		{name: "inventory-gb200-nvl72-tray-wide", files: []string{"gb200-nvl72-tray.yaml"}, output: inspect.OutputWide},
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
			edit: func(s *inspect.Snapshot) {
				inspecttest.Taint(s, "gpu-3", resourceapi.DeviceTaint{Key: "gpu.tessera.dev/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute})
				inspecttest.Taint(s, "gpu-5", resourceapi.DeviceTaint{Key: "gpu.tessera.dev/degrading", Value: "ecc-sbe", Effect: resourceapi.DeviceTaintEffectNone})
				inspecttest.Taint(s, "gpu-5", resourceapi.DeviceTaint{Key: "gpu.tessera.dev/row-remap", Value: "pending", Effect: resourceapi.DeviceTaintEffectNoSchedule})
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := inspecttest.Load(t, tc.files...)
			if tc.edit != nil {
				tc.edit(s)
			}
			inv, err := Build(s, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Print(&b, inv, tc.output); err != nil {
				t.Fatal(err)
			}
			inspecttest.Golden(t, filepath.Join("golden", tc.name+".txt"), b.Bytes())
		})
	}
}
