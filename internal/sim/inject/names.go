package inject

import (
	"sort"
	"strconv"
	"strings"
)

// sortedNames sorts gpu-<n> names by n.
func sortedNames(names []string) []string {
	num := func(s string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(s, "gpu-"))
		return n
	}
	sort.Slice(names, func(i, j int) bool { return num(names[i]) < num(names[j]) })
	return names
}
