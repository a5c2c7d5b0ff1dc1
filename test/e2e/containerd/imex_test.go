package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/imex/daemonpod"
	"github.com/tessera-gpu/tessera/internal/sim/imexstandin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// imexDaemonLabel selects the agents' IMEX daemon pods.
const imexDaemonLabel = daemonpod.LabelName + "=" + daemonpod.AppName

// TestIMEXDaemonPodsRunForTheJob: a job of two workers, each a whole
// GB200 tray, sharing one IMEX channel claim, runs in containers created
// by containerd and runc. Each tray's agent started its IMEX daemon as a
// pod of its node for the job (the sim image's stand-in on the host
// network, admitted by the chart's policy), with both trays' addresses as
// its peers and READY on its command socket, before it prepared the
// channel; each worker's container has the channel's device node. Once
// the job is gone, both daemon pods are too, and no channel is prepared.
func TestIMEXDaemonPodsRunForTheJob(t *testing.T) {
	ctx := context.Background()
	trays := []string{"ctr-tray-1", "ctr-tray-2"}
	if pods := imexDaemonPods(t); len(pods) != 0 {
		t.Fatalf("IMEX daemon pods before any job: %v", pods)
	}
	ns := namespace(t, "")
	t.Cleanup(func() { drain(t, ns) })
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "job-imex"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "imex.gpu.tessera.dev"},
		}}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tray"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "nvidia.gpu.tessera.dev", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4,
			}}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	workers := []string{"worker-0", "worker-1"}
	for _, w := range workers {
		pod := probePod(w, "", "tray")
		pod.Spec.NodeSelector = nil
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "imex", ResourceClaimName: &claim.Name})
		pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "imex"})
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound, running := boundThenRunning(t, ns, workers, 180*time.Second)
	// A measurement for docs/rack.md, not an assertion: the last binding to
	// every worker running, the daemons' start and readiness included.
	t.Logf("last worker bound to all running: %v (IMEX daemons started for the job)", running.Sub(bound).Round(10*time.Millisecond))
	var on []string
	for _, w := range workers {
		p, err := client.CoreV1().Pods(ns).Get(ctx, w, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		on = append(on, p.Spec.NodeName)
		// Every device node of both claims, the channel's among them, as
		// the container sees it.
		checkContainer(t, ns, p, p.Spec.Containers[0])
	}
	slices.Sort(on)
	if !slices.Equal(on, trays) {
		t.Fatalf("workers on %v, want one on each tray %v", on, trays)
	}
	got, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch := got.Status.Allocation.Devices.Results[0]
	n, ok := channelpool.ChannelOf(ch.Device)
	if !ok {
		t.Fatalf("claim allocated %s/%s, not a channel", ch.Pool, ch.Device)
	}
	for _, w := range workers {
		if dev := probeLog(t, ns, w, "probe").devices[fmt.Sprintf("/dev/nvidia-caps-imex-channels/channel%d", n)]; dev == "" {
			t.Errorf("%s: no device node of channel %d in its container", w, n)
		}
	}

	// The daemons: one pod per tray, on the host network, with both trays
	// as peers, each ready on its socket.
	pods := imexDaemonPods(t)
	if len(pods) != 2 {
		t.Fatalf("IMEX daemon pods %v, want one on each tray", pods)
	}
	for _, tray := range trays {
		p, ok := pods[tray]
		if !ok || !p.Spec.HostNetwork || p.Status.Phase != corev1.PodRunning {
			t.Errorf("tray %s: IMEX daemon pod %+v, want one running on the host network", tray, p)
			continue
		}
		dir := filepath.Join(cluster.SimStateDir(tray), "imex")
		nodesFile, err := os.ReadFile(filepath.Join(dir, daemonpod.NodesName))
		if err != nil || string(nodesFile) != "127.0.1.1\n127.0.1.2\n" {
			t.Errorf("tray %s: nodes file %q, %v; want both trays' addresses", tray, nodesFile, err)
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		status, err := imexstandin.Query(qctx, filepath.Join(dir, daemonpod.SocketName))
		cancel()
		if err != nil || status != "READY" {
			t.Errorf("tray %s: the daemon says %q, %v", tray, status, err)
		}
	}

	// The same tray's GPUs without a channel, for comparison.
	plain := probePod("plain", "", "tray")
	plain.Spec.NodeSelector = nil
	if _, err := client.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	drainPods(t, ns, workers)
	bound, running = boundThenRunning(t, ns, []string{"plain"}, 120*time.Second)
	t.Logf("a worker of the same shape without a channel, bound to running: %v", running.Sub(bound).Round(10*time.Millisecond))

	drain(t, ns)
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		left := imexDaemonPods(t)
		return len(left) == 0, fmt.Sprintf("IMEX daemon pods left after the job: %v", left)
	}); err != nil {
		t.Fatal(err)
	}
}

// imexDaemonPods are the IMEX daemon pods in the agents' namespace, by
// node.
func imexDaemonPods(t *testing.T) map[string]*corev1.Pod {
	t.Helper()
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: imexDaemonLabel})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range l.Items {
		p := &l.Items[i]
		if prev, ok := out[p.Spec.NodeName]; ok {
			t.Errorf("node %s runs two IMEX daemon pods: %s and %s", p.Spec.NodeName, prev.Name, p.Name)
		}
		out[p.Spec.NodeName] = p
	}
	return out
}

// boundThenRunning waits until every pod of names is bound to a node, then
// running, and returns when the last was seen bound and when all were
// seen running (polled every 50ms).
func boundThenRunning(t *testing.T, ns string, names []string, timeout time.Duration) (bound, running time.Time) {
	t.Helper()
	ctx := context.Background()
	state := func() (nBound, nRunning int) {
		for _, n := range names {
			p, err := client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				continue
			}
			if p.Spec.NodeName != "" {
				nBound++
			}
			if p.Status.Phase == corev1.PodRunning {
				nRunning++
			}
		}
		return nBound, nRunning
	}
	deadline := time.Now().Add(timeout)
	for ; ; time.Sleep(50 * time.Millisecond) {
		b, r := state()
		if b == len(names) && bound.IsZero() {
			bound = time.Now()
		}
		if r == len(names) {
			return bound, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %v: %d bound, %d running after %v", names, b, r, timeout)
		}
	}
}

// drainPods deletes the pods of names and waits until they are gone.
func drainPods(t *testing.T, ns string, names []string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	for _, n := range names {
		if err := client.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		for _, n := range names {
			if _, err := client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{}); err == nil {
				return false, "pod " + n + " still there"
			}
		}
		return true, ""
	}); err != nil {
		t.Fatal(err)
	}
}
