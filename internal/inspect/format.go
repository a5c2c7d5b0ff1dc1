package inspect

import (
	"strconv"
	"strings"
)

// HumanBytes prints a byte count in binary units, whole when exact and with
// one decimal otherwise: 80Gi, 79.6Gi, 512Mi.
func HumanBytes(b int64) string {
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	v := float64(b)
	i := 0
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + units[i]
}

// FormatNUMA is a NUMA node number, "" when unpublished.
func FormatNUMA(n *int64) string {
	if n == nil {
		return ""
	}
	return strconv.FormatInt(*n, 10)
}
