package nccltopo

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// FuzzWrite: any subset, in any order, of one vendor's whole GPUs of any
// catalogue machine gives a file the parser rules accept, whose rank order
// holds exactly those GPUs; nothing panics.
func FuzzWrite(f *testing.F) {
	names := sim.CatalogNames()
	nodes := make([]*inventory.Node, len(names))
	for i, n := range names {
		nodes[i] = machine(f, n)
	}
	f.Add(uint8(0), []byte{0, 1})
	f.Add(uint8(3), []byte{7, 6, 5, 4, 3, 2, 1, 0})
	f.Add(uint8(8), []byte{1, 3, 5})
	f.Fuzz(func(t *testing.T, m uint8, picks []byte) {
		n := nodes[int(m)%len(nodes)]
		vendors, byVendor := wholeByVendor(n)
		if len(picks) == 0 || len(vendors) == 0 {
			return
		}
		v := vendors[int(picks[0])%len(vendors)]
		pool := byVendor[v]
		var gpus []int
		for _, p := range picks[1:] {
			i := pool[int(p)%len(pool)]
			if !slices.Contains(gpus, i) {
				gpus = append(gpus, i)
			}
		}
		if len(gpus) == 0 {
			return
		}
		file, err := Build(n, gpus, Options{CPUArch: "x86_64"})
		if err != nil {
			t.Fatalf("Build(%v): %v", gpus, err)
		}
		if err := Check(file.XML, dialectOf(v)); err != nil {
			t.Fatalf("Check: %v\n%s", err, file.XML)
		}
		got := slices.Clone(file.Order)
		want := slices.Clone(gpus)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("order %v is not the GPUs %v", file.Order, gpus)
		}
	})
}
