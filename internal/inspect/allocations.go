package inspect

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Holder is one claim's hold on a device: one allocation result.
type Holder struct {
	// Claim is namespace/name.
	Claim   string `json:"claim"`
	Request string `json:"request,omitempty"`
	// Pods are the pods reserving the claim (status.reservedFor), by name
	// (they live in the claim's namespace); other consumers as
	// resource/name.
	Pods []string `json:"pods,omitempty"`
	// ShareID and ConsumedMemoryBytes are set for a share of a device that
	// allows multiple allocations.
	ShareID             string `json:"shareID,omitempty"`
	ConsumedMemoryBytes int64  `json:"consumedMemoryBytes,omitempty"`
}

// Allocations maps each device to the claims holding it.
type Allocations map[DeviceKey][]Holder

// AllocationsOf is the holders of every device the claims are allocated.
func AllocationsOf(claims []resourceapi.ResourceClaim) Allocations {
	out := Allocations{}
	for i := range claims {
		c := &claims[i]
		if c.Status.Allocation == nil {
			continue
		}
		var pods []string
		for _, r := range c.Status.ReservedFor {
			if r.APIGroup == "" && r.Resource == "pods" {
				pods = append(pods, r.Name)
			} else {
				pods = append(pods, r.Resource+"/"+r.Name)
			}
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != names.DriverName {
				continue
			}
			h := Holder{Claim: c.Namespace + "/" + c.Name, Request: r.Request, Pods: pods}
			if r.ShareID != nil {
				h.ShareID = string(*r.ShareID)
			}
			if q, ok := Lookup(r.ConsumedCapacity, publish.CapMemory); ok {
				h.ConsumedMemoryBytes = q.Value()
			}
			k := DeviceKey{r.Pool, r.Device}
			out[k] = append(out[k], h)
		}
	}
	for k := range out {
		slices.SortStableFunc(out[k], func(a, b Holder) int { return strings.Compare(a.Claim, b.Claim) })
	}
	return out
}

// String is the holder as the table prints it:
// "ns/claim 4Gi (pod p)".
func (h Holder) String() string {
	s := h.Claim
	if h.ConsumedMemoryBytes > 0 {
		s += " " + HumanBytes(h.ConsumedMemoryBytes)
	}
	switch len(h.Pods) {
	case 0:
	case 1:
		s += fmt.Sprintf(" (pod %s)", h.Pods[0])
	default:
		s += fmt.Sprintf(" (pods %s)", strings.Join(h.Pods, ","))
	}
	return s
}
