package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inspect/top"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestTelemetryFollowsLoad: pods hold a whole H100, a MIG slice of a
// static-MIG node, a capacity share of an L4 and an MI300X; `tessera-sim
// load` makes each device busy, and each node's agent, at its next
// telemetry poll, exports the load on its tessera_gpu_* series labelled
// with the device, its UUID and the pod using it, as a real GPU's readings
// would be, and `kubectl tessera top pods` lists each pod with its numbers
// (a share's memory of what its claim was given). Once the load is
// cleared and the pods are gone, no series names them and top lists none.
func TestTelemetryFollowsLoad(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		pod, node   string
		req         resourceapi.ExactDeviceRequest
		util        float64 // percent; 0: not asserted (NVML gives a MIG device none)
		allowed     string  // top's memory allowed; "": the device's total
		memory      string
		memoryBytes float64
		dev, uuid   string
	}
	hs := []*holder{
		{pod: "busy-h100", node: "gpu-h100", req: resourceapi.ExactDeviceRequest{DeviceClassName: "nvidia.gpu.tessera.dev"},
			util: 70, memory: "30Gi", memoryBytes: 30 << 30},
		{pod: "busy-mig", node: "gpu-h100-mig", req: resourceapi.ExactDeviceRequest{DeviceClassName: "mig.gpu.tessera.dev"},
			memory: "4Gi", memoryBytes: 4 << 30},
		{pod: "busy-l4-share", node: "gpu-l4-shared", req: shareRequest("7Gi"), allowed: "7Gi",
			util: 40, memory: "5Gi", memoryBytes: 5 << 30},
		{pod: "busy-mi300x", node: "gpu-mi300x", req: resourceapi.ExactDeviceRequest{DeviceClassName: "amd.gpu.tessera.dev"},
			util: 55, memory: "100Gi", memoryBytes: 100 << 30},
	}
	var names []string
	for _, h := range hs {
		claimPod(t, ns, h.pod, h.node, h.req)
		names = append(names, h.pod)
	}
	if err := scenario.WaitRunning(ctx, client, ns, names, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	load := func(h *holder, args ...string) { t.Helper(); simLoad(t, h.node, h.dev, args...) }
	for _, h := range hs {
		c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, h.pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h.dev = c.Status.Allocation.Devices.Results[0].Device
		h.uuid = str(device(t, h.node, h.dev), "uuid")
		load(h, fmt.Sprintf("--util=%g", h.util), "--memory="+h.memory)
	}
	for _, h := range hs {
		url := localcluster.MetricsURL(s, h.node)
		labels := []string{"device", h.dev, "uuid", h.uuid, "namespace", ns, "pod", h.pod}
		if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
			m := scrape(t, url)
			mem, util := m.value("tessera_gpu_memory_used_bytes", labels...), m.value("tessera_gpu_utilization_ratio", labels...)
			ok := mem == h.memoryBytes && (h.util == 0 || util == h.util/100)
			return ok, fmt.Sprintf("memory used %v, utilization %v of %v; series %v", mem, util, labels, m["tessera_gpu_memory_used_bytes"])
		}); err != nil {
			t.Errorf("node %s: %v", h.node, err)
		}
		if total := scrape(t, url).value("tessera_gpu_memory_total_bytes", labels...); total < h.memoryBytes {
			t.Errorf("node %s device %s: memory total %v, below the %v in use", h.node, h.dev, total, h.memoryBytes)
		}
	}
	lintMetrics(t, s)
	checkTop(t, s, ns, func(p top.Pod) (string, bool) {
		for _, h := range hs {
			if h.pod == p.Pod {
				want := topWant{node: h.node, device: h.dev, used: h.memory, allowed: h.allowed}
				if h.util != 0 {
					want.util = fmt.Sprintf("%g%%", h.util)
				}
				return want.check(p), true
			}
		}
		return "", false
	}, len(hs))
	for _, h := range hs {
		load(h, "--clear")
	}
	deleteAll(t, ns)
	for _, h := range hs {
		url := localcluster.MetricsURL(s, h.node)
		if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
			m := scrape(t, url)
			var left []string
			for name, ss := range m {
				for _, x := range ss {
					if x.labels["namespace"] == ns && len(name) > len("tessera_gpu_") && name[:len("tessera_gpu_")] == "tessera_gpu_" {
						left = append(left, name+" "+x.labels["pod"])
					}
				}
			}
			return len(left) == 0, fmt.Sprintf("series still name the deleted pods: %v", left)
		}); err != nil {
			t.Errorf("node %s: %v", h.node, err)
		}
	}
	if out := kubectlTessera(t, append(topArgs(s), "top", "pods", "-n", ns)...); !strings.Contains(out, "No pods hold Tessera GPUs.") {
		t.Errorf("top pods after the pods are gone:\n%s", out)
	}
}

// shareRequest asks a capacity share of an L4 of memory.
func shareRequest(memory string) resourceapi.ExactDeviceRequest {
	return resourceapi.ExactDeviceRequest{
		DeviceClassName: "nvidia.gpu.tessera.dev",
		Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].model == "L4"`}}},
		Capacity:        &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}},
	}
}

// topArgs points kubectl tessera top at every node's agent: the local
// cluster's agents are host processes, not pods. They serve /metrics over
// HTTPS to an authorized token: the CA of their certificates and the
// metrics reader's token (the admin kubeconfig holds none) come with.
func topArgs(s *localcluster.State) []string {
	args := cluster.MetricsFlags()
	for _, n := range nodes {
		args = append(args, "--metrics-url", n.Name+"="+localcluster.MetricsURL(s, n.Name))
	}
	return args
}

// topWant is what top pods should print for one pod's device.
type topWant struct{ node, device, util, used, allowed string }

// check says what of want the row p lacks, "" for nothing.
func (w topWant) check(p top.Pod) string {
	row := map[string]string{"node": p.Node, "device": p.Device, "util": "-"}
	if p.Utilization != nil {
		row["util"] = fmt.Sprintf("%.0f%%", *p.Utilization*100)
	}
	if p.MemoryUsed != nil {
		row["used"] = inspect.HumanBytes(*p.MemoryUsed)
	}
	if p.MemoryAllowed != nil {
		row["allowed"] = inspect.HumanBytes(*p.MemoryAllowed)
	}
	var bad []string
	for k, v := range map[string]string{"node": w.node, "device": w.device, "util": w.util, "used": w.used, "allowed": w.allowed} {
		if v != "" && row[k] != v {
			bad = append(bad, fmt.Sprintf("%s %q, want %q", k, row[k], v))
		}
	}
	if w.allowed == "" && p.MemoryAllowed == nil {
		bad = append(bad, "no memory allowed")
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

// checkTop runs kubectl tessera top pods -n ns until it lists n rows that
// want accepts (the next telemetry poll), and shows the table and top nodes
// once.
func checkTop(t *testing.T, s *localcluster.State, ns string, want func(top.Pod) (string, bool), n int) {
	t.Helper()
	args := append(topArgs(s), "top", "pods", "-n", ns)
	err := scenario.Poll(context.Background(), 30*time.Second, func() (bool, string) {
		var pods []top.Pod
		out := kubectlTessera(t, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), &pods); err != nil {
			return false, fmt.Sprintf("top pods -o json: %v\n%s", err, out)
		}
		var bad []string
		seen := 0
		for _, p := range pods {
			why, ok := want(p)
			if !ok {
				bad = append(bad, "unexpected pod "+p.Pod)
				continue
			}
			seen++
			if why != "" {
				bad = append(bad, p.Pod+": "+why)
			}
		}
		if seen != n {
			bad = append(bad, fmt.Sprintf("%d pods listed, want %d", seen, n))
		}
		return len(bad) == 0, strings.Join(bad, "\n")
	})
	if err != nil {
		t.Errorf("kubectl tessera top pods: %v", err)
	}
	t.Logf("kubectl tessera top pods -n %s:\n%s", ns, kubectlTessera(t, args...))
	nodesOut := kubectlTessera(t, append(topArgs(s), "top", "nodes")...)
	for _, n := range nodes {
		if !strings.Contains(nodesOut, "\n"+n.Name+" ") {
			t.Errorf("top nodes lacks node %s:\n%s", n.Name, nodesOut)
		}
	}
}

// lintMetrics runs promtool check metrics (hack/build-prometheus.sh) over
// every agent's live /metrics: no lint, with telemetry and attribution
// series present.
func lintMetrics(t *testing.T, s *localcluster.State) {
	t.Helper()
	bin := filepath.Join(repo, "_output/cluster-bin/promtool")
	for _, n := range nodes {
		resp, err := metricsClient(t).Get(localcluster.MetricsURL(s, n.Name))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on %s's agent: %v\n%s", n.Name, err, out)
		}
	}
}

// simLoad runs `tessera-sim load` on a device of a node's simulated GPUs
// (--util and --memory, or --clear).
func simLoad(t *testing.T, node, device string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "bin/tessera-sim"), append([]string{"load", "--state-dir=" + cluster.SimStateDir(node), "--device=" + device}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tessera-sim load %v on %s %s: %v\n%s", args, node, device, err, out)
	}
}
