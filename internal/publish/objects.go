package publish

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// indexMinLength mirrors the resourceslice controller's minimum index width.
const indexMinLength = 5

// Objects renders driver resources as the ResourceSlice objects the
// resourceslice controller creates for a node-local pool: same generateName
// scheme (zero-padded hex index, driver, node), same spec. Used by --dry-run
// and by tests that feed the scheduler's allocator, so both see exactly what
// a cluster would.
func Objects(driverName, nodeName string, res resourceslice.DriverResources) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for poolName, pool := range res.Pools {
		width := max(indexMinLength, len(fmt.Sprintf("%x", max(len(pool.Slices)-1, 0))))
		for i, s := range pool.Slices {
			prefix := fmt.Sprintf("%0*x-%s-%s-", width, i, driverName, nodeName)
			node := nodeName
			out = append(out, &resourceapi.ResourceSlice{
				TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
				ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
				Spec: resourceapi.ResourceSliceSpec{
					Driver:         driverName,
					NodeName:       &node,
					Pool:           resourceapi.ResourcePool{Name: poolName, Generation: max(pool.Generation, 1), ResourceSliceCount: int64(len(pool.Slices))},
					Devices:        s.Devices,
					SharedCounters: s.SharedCounters,
				},
			})
		}
	}
	return out
}
