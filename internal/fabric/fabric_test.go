package fabric

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

func node(n int, links ...inventory.Link) *inventory.Node {
	nd := &inventory.Node{Links: links}
	for i := 0; i < n; i++ {
		nd.GPUs = append(nd.GPUs, inventory.GPU{UUID: fmt.Sprintf("GPU-%d", i)})
	}
	return nd
}

func nvl(a, b int) inventory.Link {
	return inventory.Link{Kind: inventory.LinkNVLink, A: a, B: b, BandwidthGBps: 50}
}

func TestIslands(t *testing.T) {
	var sw []inventory.Link
	for i := 0; i < 8; i++ {
		sw = append(sw, inventory.Link{Kind: inventory.LinkNVSwitch, A: i, Switch: "plane0", BandwidthGBps: 450})
	}
	var mesh []inventory.Link
	for a := 0; a < 4; a++ {
		for b := a + 1; b < 4; b++ {
			mesh = append(mesh, nvl(a, b), nvl(a+4, b+4))
		}
	}
	// Hybrid cube-mesh (DGX-1): two fully linked quads plus i <-> i+4.
	cube := append(append([]inventory.Link{}, mesh...), nvl(0, 4), nvl(1, 5), nvl(2, 6), nvl(3, 7))

	tests := []struct {
		name  string
		node  *inventory.Node
		want  [][]int // island members per GPU index
		kinds []inventory.LinkKind
	}{
		{"nvswitch plane", node(8, sw...), repeat([]int{0, 1, 2, 3, 4, 5, 6, 7}, 8), repeatKind(inventory.LinkNVSwitch, 8)},
		{"pcie only", node(3), [][]int{{0}, {1}, {2}}, repeatKind(inventory.LinkPCIe, 3)},
		{"bridged pairs", node(4, nvl(0, 1), nvl(2, 3)), [][]int{{0, 1}, {0, 1}, {2, 3}, {2, 3}}, repeatKind(inventory.LinkNVLink, 4)},
		{"chain splits", node(3, nvl(0, 1), nvl(1, 2)), [][]int{{0, 1}, {0, 1}, {2}}, repeatKind(inventory.LinkNVLink, 3)},
		{"cube mesh quads", node(8, cube...), append(repeat([]int{0, 1, 2, 3}, 4), repeat([]int{4, 5, 6, 7}, 4)...), repeatKind(inventory.LinkNVLink, 8)},
		{"mixed bridged and alone", node(3, nvl(1, 2)), [][]int{{0}, {1, 2}, {1, 2}}, []inventory.LinkKind{"pcie", "nvlink", "nvlink"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Compute(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			for i := range f {
				if !reflect.DeepEqual(f[i].Members, tc.want[i]) {
					t.Errorf("GPU %d island %v, want %v", i, f[i].Members, tc.want[i])
				}
				if f[i].Kind != tc.kinds[i] {
					t.Errorf("GPU %d fabric %q, want %q", i, f[i].Kind, tc.kinds[i])
				}
				for j := range f {
					same := reflect.DeepEqual(tc.want[i], tc.want[j])
					if (f[i].Island == f[j].Island) != same {
						t.Errorf("GPUs %d,%d: island ids %q %q, same island want %v", i, j, f[i].Island, f[j].Island, same)
					}
				}
			}
		})
	}
}

func TestBandwidthAndErrors(t *testing.T) {
	f, err := Compute(node(2, nvl(0, 1), nvl(0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if f[0].BandwidthGBps != 100 || f[1].BandwidthGBps != 100 {
		t.Errorf("bandwidth %d %d, want 100 each", f[0].BandwidthGBps, f[1].BandwidthGBps)
	}
	if len(f[0].Island) > 64 {
		t.Errorf("island id %q longer than 64", f[0].Island)
	}
	for _, bad := range []inventory.Link{nvl(0, 5), nvl(1, 1), {Kind: inventory.LinkNVSwitch, A: 0}, {Kind: "warp", A: 0, B: 1}} {
		if _, err := Compute(node(2, bad)); err == nil {
			t.Errorf("link %+v: want error", bad)
		}
	}
}

func TestIslandIDDiffersAcrossNodes(t *testing.T) {
	a := node(2, nvl(0, 1))
	b := node(2, nvl(0, 1))
	b.GPUs[0].UUID, b.GPUs[1].UUID = "GPU-x", "GPU-y"
	fa, _ := Compute(a)
	fb, _ := Compute(b)
	if fa[0].Island == fb[0].Island {
		t.Errorf("two nodes share island id %q", fa[0].Island)
	}
}

func repeat(v []int, n int) [][]int {
	out := make([][]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func repeatKind(k inventory.LinkKind, n int) []inventory.LinkKind {
	out := make([]inventory.LinkKind, n)
	for i := range out {
		out[i] = k
	}
	return out
}

// TestUnknownBandwidth: a link whose width the backend could not read makes
// its GPUs' aggregate unknown (not the too-low sum of the rest), while the
// island is unchanged; GPUs with only known links keep their sum.
func TestUnknownBandwidth(t *testing.T) {
	xgmi := func(a, b int, gbps int64, unknown bool) inventory.Link {
		return inventory.Link{Kind: inventory.LinkXGMI, A: a, B: b, BandwidthGBps: gbps, BandwidthUnknown: unknown}
	}
	tests := []struct {
		name    string
		node    *inventory.Node
		bw      []int64
		unknown []bool
	}{
		{"every link unknown", node(3, xgmi(0, 1, 0, true), xgmi(0, 2, 0, true), xgmi(1, 2, 0, true)),
			[]int64{0, 0, 0}, []bool{true, true, true}},
		{"one unknown link taints only its ends", node(3, xgmi(0, 1, 64, false), xgmi(0, 2, 64, false), xgmi(1, 2, 0, true)),
			[]int64{128, 0, 0}, []bool{false, true, true}},
		{"a known 0 stays a known 0", node(2, xgmi(0, 1, 0, false)), []int64{0, 0}, []bool{false, false}},
		{"nvswitch plane of unknown width", node(2, inventory.Link{Kind: inventory.LinkNVSwitch, A: 0, Switch: "p", BandwidthUnknown: true},
			inventory.Link{Kind: inventory.LinkNVSwitch, A: 1, Switch: "p", BandwidthGBps: 450}), []int64{0, 450}, []bool{true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Compute(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			for i := range f {
				if f[i].BandwidthGBps != tc.bw[i] || f[i].BandwidthUnknown != tc.unknown[i] {
					t.Errorf("GPU %d: bandwidth %d unknown %v, want %d %v", i, f[i].BandwidthGBps, f[i].BandwidthUnknown, tc.bw[i], tc.unknown[i])
				}
				if f[i].Island != f[0].Island {
					t.Errorf("GPU %d left GPU 0's island", i)
				}
			}
		})
	}
}
