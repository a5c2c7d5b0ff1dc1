package inspect

import (
	"regexp"
	"strconv"
)

// Device names as pkg/publish/names.go makes them: a partition's name starts
// with its GPU's.
var partitionName = regexp.MustCompile(`^(gpu-[0-9]+)-`)

// PartitionParent is the GPU a partition's name starts with.
func PartitionParent(name string) string {
	if m := partitionName.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

// CompareDeviceNames orders names with their numbers compared as numbers,
// so gpu-2 comes before gpu-10.
func CompareDeviceNames(a, b string) int {
	for a != "" && b != "" {
		ia, ib := digitsEnd(a), digitsEnd(b)
		if ia > 0 && ib > 0 {
			na, _ := strconv.ParseUint(a[:ia], 10, 64)
			nb, _ := strconv.ParseUint(b[:ib], 10, 64)
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[ia:], b[ib:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitsEnd(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
