package podresources

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultSocket is the kubelet's PodResources socket under its default
// root directory.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessage caps the List answer: a node's pods with every container's
// devices, CPUs and memory. The kubelet's own limit is 16 MiB.
const maxMessage = 16 << 20

// Allocation is one device of one claim that one container of a running
// pod uses, as the kubelet reports it.
type Allocation struct {
	Namespace, Pod, Container string
	ClaimNamespace, Claim     string
	Pool, Device              string
	// ShareID is the allocation's share of a multi-allocatable device;
	// empty where the kubelet reports none.
	ShareID string
}

// List asks the kubelet on socket for its pods' resources and returns the
// devices of driver, in the kubelet's order.
func List(ctx context.Context, socket, driver string) ([]Allocation, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("pod resources socket %s: %w", socket, err)
	}
	defer conn.Close()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("pod resources socket %s: List: %w", socket, err)
	}
	return Select(resp, driver), nil
}

// Select keeps the devices of driver from a List answer, each once per
// container and claim: a claim of several requests has one more prepared
// entry naming its last device again (the whole-claim CDI IDs,
// internal/cdi/scope.go), which the kubelet lists like any other.
func Select(resp *podresourcesapi.ListPodResourcesResponse, driver string) []Allocation {
	var out []Allocation
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			for _, dr := range c.GetDynamicResources() {
				seen := map[[3]string]bool{}
				for _, r := range dr.GetClaimResources() {
					if r.GetDriverName() != driver || r.GetDeviceName() == "" {
						continue
					}
					k := [3]string{r.GetPoolName(), r.GetDeviceName(), r.GetShareId()}
					if seen[k] {
						continue
					}
					seen[k] = true
					out = append(out, Allocation{
						Namespace: p.GetNamespace(), Pod: p.GetName(), Container: c.GetName(),
						ClaimNamespace: dr.GetClaimNamespace(), Claim: dr.GetClaimName(),
						Pool: r.GetPoolName(), Device: r.GetDeviceName(), ShareID: r.GetShareId(),
					})
				}
			}
		}
	}
	return out
}
