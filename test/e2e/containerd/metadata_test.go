package containerd

import (
	"context"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestDeviceMetadataInContainer: a container created by containerd and
// runc reads its claim's device metadata file (KEP-5304) where the
// kubelet mounts it and prints it; decoded with the library a workload
// would use, it names the claim and the allocated GPU with the attributes
// its ResourceSlice publishes (uuid, PCI address, model...). The pod and
// its claim are deleted at the end. (No node of this cluster runs with
// --passthrough: a passed GPU's file is read through the fake runtime's
// record, test/e2e TestPassthrough.)
func TestDeviceMetadataInContainer(t *testing.T) {
	ctx := context.Background()
	node := nodes[0].Name
	ns := namespace(t, "")
	t.Cleanup(func() { drain(t, ns) })
	waitWebhook(t)
	claimTemplate(t, ns, "one-h100", "nvidia.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "H100"`, "")
	if _, err := client.CoreV1().Pods(ns).Create(ctx, probePod("reader", node, "one-h100"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitRunning(ctx, client, ns, []string{"reader"}, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimName := *p.Status.ResourceClaimStatuses[0].ResourceClaimName
	c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s: status.allocation %+v, want one device", claimName, c.Status.Allocation)
	}
	res := c.Status.Allocation.Devices.Results[0]

	// A template's claim: its file is under the pod's name for the claim
	// and the request (docs/claims.md).
	path := scenario.MetadataMount + "resourceclaimtemplates/gpu/gpu/gpu.tessera.dev-metadata.json"
	got := probeLog(t, ns, "reader", "probe")
	text, ok := got.metadata[path]
	if !ok {
		t.Fatalf("container printed no %s (metadata files %v, mounts %v)", path, keys(got.metadata), got.mounts)
	}
	md, err := scenario.DecodeMetadata([]byte(text))
	if err != nil {
		t.Fatalf("decode %s as the container read it: %v\n%s", path, err, text)
	}
	if md.Name != claimName || md.Namespace != ns || string(md.UID) != string(c.UID) {
		t.Errorf("%s names claim %s/%s (uid %s), want %s/%s (uid %s)", path, md.Namespace, md.Name, md.UID, ns, claimName, c.UID)
	}
	checkMetadataDevice(t, md.Requests, res, publishedAttrs(t, res))

	drain(t, ns)
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		l, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 0, "claims left: " + strings.Join(claimNames(l.Items), ",")
	}); err != nil {
		t.Errorf("the pod's claim was not deleted with it: %v", err)
	}
}

// publishedAttrs are the attributes the allocated device is published
// with.
func publishedAttrs(t *testing.T, res resourceapi.DeviceRequestAllocationResult) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	t.Helper()
	for _, s := range nodeSlicesOf(t, res.Pool) {
		for _, d := range s.Spec.Devices {
			if s.Spec.Driver == res.Driver && d.Name == res.Device {
				return d.Attributes
			}
		}
	}
	t.Fatalf("device %s/%s of the allocation is not published", res.Pool, res.Device)
	return nil
}

// checkMetadataDevice: the metadata lists the allocated device under its
// request, with every attribute it is published with, the same value;
// its uuid and PCI address among them.
func checkMetadataDevice(t *testing.T, reqs []metadata.DeviceMetadataRequest, res resourceapi.DeviceRequestAllocationResult, published map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) {
	t.Helper()
	var dev *metadata.Device
	for _, r := range reqs {
		for i, d := range r.Devices {
			if r.Name == res.Request && d.Driver == res.Driver && d.Pool == res.Pool && d.Name == res.Device {
				dev = &r.Devices[i]
			}
		}
	}
	if dev == nil {
		t.Fatalf("metadata requests %+v do not list %s/%s for request %s", reqs, res.Pool, res.Device, res.Request)
	}
	for _, k := range []resourceapi.QualifiedName{"uuid", "resource.kubernetes.io/pciBusID", "model"} {
		if scenario.AttrString(published[k]) == "" {
			t.Errorf("device %s/%s is published without %s", res.Pool, res.Device, k)
		}
	}
	for k, v := range published {
		if got, want := scenario.AttrString(dev.Attributes[k]), scenario.AttrString(v); got != want {
			t.Errorf("metadata of %s/%s: attributes[%s] = %q, published %q", res.Pool, res.Device, k, got, want)
		}
	}
	t.Logf("metadata of %s/%s: its %d published attributes, uuid %s, pciBusID %s", res.Pool, res.Device, len(published),
		scenario.AttrString(dev.Attributes["uuid"]), scenario.AttrString(dev.Attributes["resource.kubernetes.io/pciBusID"]))
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func claimNames(cs []resourceapi.ResourceClaim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
