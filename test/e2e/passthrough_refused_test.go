package e2e

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkPassthroughRefused: demo 23's claim of the vfio class, allocated
// by hand the GPU that holds the notebook's MIG slice, is refused by the
// node's agent with an event naming the device and why; the slice stays
// and the GPU stays on its host driver.
func checkPassthroughRefused(t *testing.T, o outcome) {
	ctx := context.Background()
	c, err := client.ResourceV1().ResourceClaims(o.ns).Get(ctx, "passthrough-forced", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim passthrough-forced: status.allocation %+v, want the one GPU allocated by hand", c.Status.Allocation)
	}
	res := c.Status.Allocation.Devices.Results[0]
	msg := o.prepareFailed["vm-beside-slice"]
	if !strings.Contains(msg, "device "+res.Device) || !(strings.Contains(msg, "partition(s)") || strings.Contains(msg, "in use by another prepared claim")) {
		t.Errorf("the kubelet's event %q does not name %s and the slice it holds", msg, res.Device)
	}
	nb := o.pods["notebook-1g"]
	expectDevices(t, nb, 1, func(d resourceapi.Device) bool {
		return str(d, "type") == "partition" && str(d, "profile") == "1g.10gb"
	})
	if parent := str(nb.devices[0], "parentUUID"); parent != str(device(t, res.Pool, res.Device), "uuid") {
		t.Errorf("the claim was allocated %s/%s, not the GPU %s that holds the notebook's slice", res.Pool, res.Device, parent)
	}
	if n := len(simState(t, res.Pool).partitions); n != 1 {
		t.Errorf("%d partitions on %s after the refusal, want the notebook's one", n, res.Pool)
	}
	if addr := pciOf(t, res.Pool, res.Device); driverOn(t, res.Pool, addr) != "nvidia" {
		t.Errorf("%s (%s) left its driver after a refused passthrough", res.Device, addr)
	}
}
