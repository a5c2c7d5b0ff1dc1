package nvml

import (
	"sort"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// sortLinks gives links a stable order (switch links first, then edges by
// GPU pair) so two discoveries of the same node compare equal.
func sortLinks(ls []inventory.Link) {
	sort.SliceStable(ls, func(a, b int) bool {
		x, y := ls[a], ls[b]
		if x.Kind != y.Kind {
			return x.Kind > y.Kind // nvswitch before nvlink
		}
		if x.A != y.A {
			return x.A < y.A
		}
		return x.B < y.B
	})
}
