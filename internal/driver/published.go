package driver

import (
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// publishedCounts counts a slice build's devices by vendor, model and type
// for tessera_published_devices.
func publishedCounts(res *publish.Result) map[metrics.DeviceKey]int {
	out := map[metrics.DeviceKey]int{}
	for _, e := range res.Devices {
		k := metrics.DeviceKey{Vendor: string(e.GPU.Vendor), Model: e.GPU.Model, Type: metrics.TypeGPU}
		if e.Partition != nil || e.Carve != nil {
			k.Type = metrics.TypePartition
		}
		out[k]++
	}
	return out
}

// memorySlices converts a build's dynamic GPUs' memory slices for
// tessera_mig_free_memory_slices and tessera_mig_unusable_memory_slices.
func memorySlices(res *publish.Result) map[string]metrics.MemorySlices {
	out := make(map[string]metrics.MemorySlices, len(res.Slices))
	for dev, s := range res.Slices {
		out[dev] = metrics.MemorySlices{Free: s.Free, Unusable: s.Unusable}
	}
	return out
}

// withholds reports whether res withholds any partition from the scheduler.
func withholds(res *publish.Result) bool {
	for _, m := range res.Modes {
		if len(m.Withheld) > 0 {
			return true
		}
	}
	return false
}
