package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// inject runs `tessera-sim inject` against a node's simulated GPUs, as an
// operator would, and returns when the fault is recorded.
func inject(t *testing.T, node, device string, args ...string) time.Time {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "bin", "tessera-sim"), append([]string{"inject",
		"--state-dir=" + filepath.Join(cluster.NodeDir(node), "sim"), "--device=" + device}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tessera-sim inject %v: %v\n%s", args, err, out)
	}
	return time.Now()
}

// taintsOf is the published taints of a node's device, "key=value:Effect".
func taintsOf(t *testing.T, node, dev string) string {
	t.Helper()
	var out []string
	for _, tt := range device(t, node, dev).Taints {
		out = append(out, strings.TrimPrefix(tt.Key, "gpu.tessera.dev/")+"="+tt.Value+":"+string(tt.Effect))
	}
	return strings.Join(out, ",")
}

func waitTaints(t *testing.T, node, dev, want string) time.Time {
	t.Helper()
	if err := scenario.Poll(context.Background(), 60*time.Second, func() (bool, string) {
		got := taintsOf(t, node, dev)
		return got == want, fmt.Sprintf("taints of %s/%s %q, want %q", node, dev, got, want)
	}); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// allocatedDevice is the one device the named claim got.
func allocatedDevice(t *testing.T, ns, claim string) string {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s allocation %+v", claim, c.Status.Allocation)
	}
	return c.Status.Allocation.Devices.Results[0].Device
}

// podDeviceHealth is what the pod's status says of its devices' health
// (KEP-4680), as "health:message" per device.
func podDeviceHealth(t *testing.T, ns, pod string) []string {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		for _, rs := range cs.AllocatedResourcesStatus {
			for _, r := range rs.Resources {
				m := ""
				if r.Message != nil {
					m = *r.Message
				}
				out = append(out, string(r.Health)+":"+m)
			}
		}
	}
	return out
}

// A GPU that fails is drained and comes back: an application XID changes
// nothing; a contained error taints NoSchedule and the pod status says
// Unhealthy while the pod keeps running; a GPU fallen off the bus taints
// NoExecute and kube-controller-manager evicts the pod, whose replacement
// lands on another GPU; after the reset the taint goes and the GPU is
// allocatable again; a ramp of corrected errors taints NoSchedule
// "degrading" and the pod on that GPU stays.
func TestHealthTaintsDrainAndRecover(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const node = "gpu-h100"
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	url := localcluster.MetricsURL(s, node)

	gpuPod(t, ns, "victim", node)
	if err := scenario.WaitRunning(ctx, client, ns, []string{"victim"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	dev := allocatedDevice(t, ns, "victim")
	t.Cleanup(func() { inject(t, node, dev, "--clear") })

	// An application's XID: seen (counted once handled), no taint.
	seen := scrape(t, url).value("tessera_health_events_total", "kind", "xid", "code", "13")
	inject(t, node, dev, "--xid=13")
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		n := scrape(t, url).value("tessera_health_events_total", "kind", "xid", "code", "13")
		return n > seen, fmt.Sprintf("xid 13 events %v", n)
	}); err != nil {
		t.Fatal(err)
	}
	if got := taintsOf(t, node, dev); got != "" {
		t.Fatalf("XID 13 tainted %s: %s", dev, got)
	}

	// A contained ECC error: NoSchedule, the pod stays and is told.
	inject(t, node, dev, "--xid=94", "--message=contained ECC error")
	waitTaints(t, node, dev, "xid=94:NoSchedule")
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		h := podDeviceHealth(t, ns, "victim")
		return len(h) == 1 && strings.HasPrefix(h[0], "Unhealthy"), fmt.Sprintf("pod device health %v", h)
	}); err != nil {
		t.Fatal(err)
	}

	// Fallen off the bus: NoExecute, the pod is evicted.
	injected := inject(t, node, dev, "--xid=79", "--message=GPU has fallen off the bus")
	tainted := waitTaints(t, node, dev, "xid=79:NoExecute")
	t.Logf("inject to taint in the API server: %s", tainted.Sub(injected).Round(time.Millisecond))
	if err := scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed, "pod victim still " + string(p.Status.Phase)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("inject to eviction: %s", time.Since(injected).Round(time.Millisecond))
	gpuPod(t, ns, "replacement", node)
	if err := scenario.WaitRunning(ctx, client, ns, []string{"replacement"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	other := allocatedDevice(t, ns, "replacement")
	if other == dev {
		t.Fatalf("replacement landed on the failed GPU %s", dev)
	}
	t.Cleanup(func() { inject(t, node, other, "--clear") })

	// Reset: the taint goes and exactly that GPU can be allocated again.
	inject(t, node, dev, "--clear")
	waitTaints(t, node, dev, "")
	uuid := str(device(t, node, dev), "uuid")
	claimPod(t, ns, "back", node, resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev",
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].uuid == "` + uuid + `"`}}}})
	if err := scenario.WaitRunning(ctx, client, ns, []string{"back"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	// Corrected errors ramping up: NoSchedule "degrading", the pod stays.
	for range 3 {
		inject(t, node, other, "--ecc-sbe=4")
	}
	waitTaints(t, node, other, "degrading=ecc-sbe:NoSchedule")
	p, err := client.CoreV1().Pods(ns).Get(ctx, "replacement", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod on the degrading GPU: %v %v", err, p.Status.Phase)
	}
	if h := podDeviceHealth(t, ns, "replacement"); len(h) == 1 && strings.HasPrefix(h[0], "Unhealthy") {
		t.Errorf("a degrading GPU is reported %v; degradation is not a failure", h)
	}
	deleteAll(t, ns)
}
