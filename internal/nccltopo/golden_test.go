package nccltopo

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/golden"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// shape is a claim's GPUs, by position in a vendor's whole GPUs.
type shape struct {
	name string
	pick func(n int) []int
}

var shapes = []shape{
	{"pair", func(n int) []int { return []int{0, 1} }},
	// first and last: across islands, switches or NUMA nodes where the
	// machine has them.
	{"ends", func(n int) []int { return []int{0, n - 1} }},
	{"four", func(n int) []int {
		if n <= 4 {
			return nil
		}
		return []int{0, 1, 2, 3}
	}},
	// every other GPU: a subset that crosses every boundary.
	{"odd-half", func(n int) []int {
		if n < 4 {
			return nil
		}
		var out []int
		for i := 1; i < n; i += 2 {
			out = append(out, i)
		}
		return out
	}},
	{"all", func(n int) []int { return seq(n) }},
	// all, handed over backwards: the file must not depend on the order
	// of the allocation.
	{"all-reversed", func(n int) []int {
		s := seq(n)
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
		return s
	}},
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestGolden writes the file of several claim shapes on every catalogue
// machine, checks each against the parser rules, and pins the bytes and
// the rank order (testdata/golden, rewritten with -update).
func TestGolden(t *testing.T) {
	var orders bytes.Buffer
	for _, name := range sim.CatalogNames() {
		n := machine(t, name)
		vendors, byVendor := wholeByVendor(n)
		for _, v := range vendors {
			gpus := byVendor[v]
			if len(gpus) < 2 {
				continue
			}
			seen := map[string]string{}
			for _, sh := range shapes {
				pos := sh.pick(len(gpus))
				if pos == nil || (sh.name == "ends" && len(gpus) == 2) {
					continue
				}
				idx := make([]int, len(pos))
				for i, p := range pos {
					idx[i] = gpus[p]
				}
				id := fmt.Sprintf("%s-%s-%s", name, v, sh.name)
				t.Run(id, func(t *testing.T) {
					f, err := Build(n, idx, Options{CPUArch: "x86_64"})
					if err != nil {
						t.Fatal(err)
					}
					if err := Check(f.XML, dialectOf(v)); err != nil {
						t.Fatalf("Check: %v\n%s", err, f.XML)
					}
					var ids []string
					for _, i := range f.Order {
						ids = append(ids, n.GPUs[i].PCIBusID)
					}
					fmt.Fprintf(&orders, "%s: %s\n", id, strings.Join(ids, " "))
					key := strings.TrimSuffix(sh.name, "-reversed")
					if prev, ok := seen[key]; ok && prev != string(f.XML) {
						t.Errorf("the file depends on the allocation's order")
					}
					seen[key] = string(f.XML)
					if sh.name != "all-reversed" {
						golden.Compare(t, filepath.Join("testdata", "golden", id+".xml"), f.XML)
					}
				})
			}
		}
	}
	golden.Compare(t, filepath.Join("testdata", "golden", "orders.txt"), orders.Bytes())
}
