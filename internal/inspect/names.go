package inspect

import (
	"strconv"

	"github.com/tessera-gpu/tessera/internal/names"
)

// PartitionParent is the GPU a partition's name starts with (internal/names);
// the name itself when it names no GPU.
func PartitionParent(name string) string {
	if gpu, ok := names.ParentGPU(name); ok {
		return gpu
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
