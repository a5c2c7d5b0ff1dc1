package doctor

import (
	"fmt"
	"strings"
)

// capFindings keeps the first maxListed findings and counts the rest in one
// more of the same status.
func capFindings(fs []Finding, st Status, check, node, what string) []Finding {
	if len(fs) <= maxListed {
		return fs
	}
	rest := len(fs) - maxListed
	return append(fs[:maxListed], Finding{Status: st, Check: check, Node: node,
		Detail: fmt.Sprintf("and %d more %s", rest, what), Fix: fs[0].Fix})
}

// truncateMessage shortens s to about n characters, on a rune boundary.
func truncateMessage(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
