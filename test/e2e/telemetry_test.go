package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestTelemetryFollowsLoad: a pod holds a whole H100, another a MIG slice
// of a static-MIG node; `tessera-sim load` makes each device busy, and
// each node's agent, at its next telemetry poll, exports the load on its
// tessera_gpu_* series labelled with the device, its UUID and the pod
// using it, as a real GPU's readings would be. Once the load is cleared and
// the pods are gone, no series names them.
func TestTelemetryFollowsLoad(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		pod, node, class string
		util             float64 // percent; 0: not asserted (NVML gives a MIG device none)
		memory           string
		memoryBytes      float64
		dev, uuid        string
	}
	hs := []*holder{
		{pod: "busy-h100", node: "gpu-h100", class: "nvidia.gpu.tessera.dev", util: 70, memory: "30Gi", memoryBytes: 30 << 30},
		{pod: "busy-mig", node: "gpu-h100-mig", class: "mig.gpu.tessera.dev", memory: "4Gi", memoryBytes: 4 << 30},
	}
	var names []string
	for _, h := range hs {
		claimPod(t, ns, h.pod, h.node, resourceapi.ExactDeviceRequest{DeviceClassName: h.class})
		names = append(names, h.pod)
	}
	if err := scenario.WaitRunning(ctx, client, ns, names, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	load := func(h *holder, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(repo, "bin/tessera-sim"), append([]string{"load", "--state-dir=" + cluster.SimStateDir(h.node), "--device=" + h.dev}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tessera-sim load %v: %v\n%s", args, err, out)
		}
	}
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
}
