package topocmd

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
)

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
		{"topo-gb200-nvl72-tray", "tray-0", []string{"gb200-nvl72-tray.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := Build(inspecttest.Load(t, tc.files...), tc.node)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Print(&b, topo); err != nil {
				t.Fatal(err)
			}
			inspecttest.Golden(t, filepath.Join("golden", tc.name+".txt"), b.Bytes())
		})
	}
}
