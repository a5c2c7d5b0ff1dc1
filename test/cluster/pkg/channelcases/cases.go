// Package channelcases holds the writes an agent's token may ask for a
// multi-node NVLink domain's IMEX channels (internal/channelpool): the
// ResourceSlices and Leases the agent writes, and the ways out a stolen
// token would try. The chart's admission policies must admit the first and
// refuse every other: test/chart evaluates the policies with Kubernetes'
// CEL, test/e2e's TestChart sends each as a dry run to the real API server
// as the node-bound agent.
package channelcases

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/names"
)

// Domain is the domain of the cases: a GB200 rack's clique.
const Domain = "00000001-0000-0000-0000-000000000001.2"

// Slice is the first slice of Domain's pool of n channels as the agent's
// resourceslice controller writes it, owned by node.
func Slice(node string, n int) (*resourceapi.ResourceSlice, error) {
	p, err := channelpool.Pool(Domain, n)
	if err != nil {
		return nil, err
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            channelpool.PoolName(Domain) + "-chart-test",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: "node-uid"}},
		},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:       names.DriverName,
			Pool:         resourceapi.ResourcePool{Name: channelpool.PoolName(Domain), Generation: 1, ResourceSliceCount: int64(len(p.Slices))},
			NodeSelector: p.NodeSelector,
			Devices:      p.Slices[0].Devices,
		},
	}, nil
}

// SliceCase is one change of the agent's channel slice.
type SliceCase struct {
	Name   string
	Change func(s *resourceapi.ResourceSlice)
	// Message is what the policy's refusal says; "" where admitted.
	Message string
}

// SliceCases are the agent's own slice and the ways out of it.
func SliceCases() []SliceCase {
	dev := func(f func(d *resourceapi.Device)) func(*resourceapi.ResourceSlice) {
		return func(s *resourceapi.ResourceSlice) { f(&s.Spec.Devices[0]) }
	}
	const shape, devices = "names no node and selects exactly the nodes", "holds only its domain's channel devices"
	return []SliceCase{
		{Name: "the domain's channels", Change: func(*resourceapi.ResourceSlice) {}},
		{Name: "a node name", Change: func(s *resourceapi.ResourceSlice) { s.Spec.NodeSelector, s.Spec.NodeName = nil, ptr.To("tray-9") }, Message: shape},
		{Name: "all nodes", Change: func(s *resourceapi.ResourceSlice) { s.Spec.NodeSelector, s.Spec.AllNodes = nil, ptr.To(true) }, Message: shape},
		{Name: "another domain's nodes", Change: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeSelector = channelpool.NodeSelector("00000001-0000-0000-0000-000000000001.3")
		}, Message: shape},
		{Name: "a selector widened to every other domain", Change: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Operator = corev1.NodeSelectorOpNotIn
			s.Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"00000001-0000-0000-0000-000000000001.3"}
		}, Message: shape},
		{Name: "a selector with a second requirement", Change: func(s *resourceapi.ResourceSlice) {
			t := &s.Spec.NodeSelector.NodeSelectorTerms[0]
			t.MatchExpressions = append(t.MatchExpressions, corev1.NodeSelectorRequirement{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"victim"}})
		}, Message: shape},
		{Name: "another driver", Change: func(s *resourceapi.ResourceSlice) { s.Spec.Driver = "gpu.nvidia.com" }, Message: "spec.driver must be gpu.tessera.dev"},
		{Name: "a GPU in the pool", Change: dev(func(d *resourceapi.Device) {
			d.Name = "gpu-0"
			d.Attributes["type"] = resourceapi.DeviceAttribute{StringValue: ptr.To("gpu")}
		}), Message: devices},
		{Name: "a channel under another number", Change: dev(func(d *resourceapi.Device) {
			d.Attributes[channelpool.AttrChannel] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(9))}
		}), Message: devices},
		{Name: "another domain's channel", Change: dev(func(d *resourceapi.Device) {
			d.Attributes["fabricDomain"] = resourceapi.DeviceAttribute{StringValue: ptr.To("00000001-0000-0000-0000-000000000001.3")}
		}), Message: devices},
		{Name: "an extra attribute", Change: dev(func(d *resourceapi.Device) {
			d.Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To("B200")}
		}), Message: devices},
		{Name: "a channel shared by several claims", Change: dev(func(d *resourceapi.Device) { d.AllowMultipleAllocations = ptr.To(true) }), Message: devices},
		{Name: "a channel with capacity", Change: dev(func(d *resourceapi.Device) {
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}}
		}), Message: devices},
		{Name: "an owner that is not a node", Change: func(s *resourceapi.ResourceSlice) {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "default", UID: "u"}}
		}, Message: "owned by a Node"},
	}
}

// Lease is Domain's lease held by holder ("" for none).
func Lease(namespace, holder string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: channelpool.LeaseName(Domain), Namespace: namespace}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.LeaseDurationSeconds = ptr.To(int32(15))
	}
	return l
}

// LeaseCase is a lease write by the agent of node.
type LeaseCase struct {
	Name  string
	Lease func(namespace, node string) *coordinationv1.Lease
	// Message is what the policy's refusal says; "" where admitted.
	Message string
}

// LeaseCases are the agent's own lease writes and the ways out.
func LeaseCases() []LeaseCase {
	return []LeaseCase{
		{Name: "the domain's lease for its own node", Lease: func(ns, node string) *coordinationv1.Lease { return Lease(ns, node) }},
		{Name: "the domain's lease handed back", Lease: func(ns, _ string) *coordinationv1.Lease { return Lease(ns, "") }},
		{Name: "the domain's lease for another node", Lease: func(ns, _ string) *coordinationv1.Lease { return Lease(ns, "tray-9") },
			Message: "holds a domain's lease for its own node only"},
		{Name: "another component's lease", Lease: func(ns, node string) *coordinationv1.Lease {
			l := Lease(ns, node)
			l.Name = "kube-scheduler"
			return l
		}, Message: "writes only the IMEX channel leases"},
	}
}
