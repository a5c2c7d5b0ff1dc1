package uninstall

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func claim(ns, name, driver, pool string, pods ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: pool, Device: "gpu-0"}},
	}}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID("u-" + p)})
	}
	return c
}

// TestClaimsInUse: only claims of the driver, on the given nodes, that a
// pod reserves, are in use.
func TestClaimsInUse(t *testing.T) {
	client := fake.NewClientset(
		claim("ml", "train", Driver, "node-a", "trainer"),
		claim("ml", "idle", Driver, "node-a"),            // allocated, no pod
		claim("ml", "other-node", Driver, "node-b", "p"), // not this release's node
		claim("ml", "other-driver", "nic.example", "node-a", "p"),
	)
	got, err := ClaimsInUse(context.Background(), client, map[string]bool{"node-a": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].String() != "ml/train on node-a (pods trainer)" {
		t.Errorf("in use: %v, want ml/train only", got)
	}
}
