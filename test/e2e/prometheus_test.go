package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inspect/top"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/promtest"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// promJob is the agents' job as the chart's ServiceMonitor names it.
const promJob = promtest.Job

// prometheus is a real Prometheus server scraping every agent of the local
// cluster (test/cluster/pkg/promtest).
type prometheus = promtest.Server

func startPrometheus(t *testing.T, s *localcluster.State) *prometheus {
	t.Helper()
	return startPrometheusWith(t, s, agentsJob(s, promJob, promtest.Bearer(cluster.MetricsTokenFile())))
}

// agentsJob is a scrape config of every agent (promtest.AgentsJob).
func agentsJob(s *localcluster.State, name string, authorization map[string]any) map[string]any {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return promtest.AgentsJob(cluster, s, names, name, authorization)
}

// startPrometheusWith starts Prometheus with the chart's rules scraping
// jobs (agentsJob).
func startPrometheusWith(t *testing.T, s *localcluster.State, jobs ...map[string]any) *prometheus {
	t.Helper()
	return promtest.Start(t, cluster, s, repo, jobs...)
}

// TestPrometheus: a real Prometheus scrapes every agent of the local
// cluster with the chart's rules. While pods hold a whole H100, a MIG
// slice, an L4 share and an MI300X and their GPUs are busy, PromQL returns
// each pod's utilization and memory with its namespace and pod, the
// recording rules each pod's, every dashboard panel's query returns
// series, and `kubectl tessera top pods --prometheus-url` lists the pods;
// an XID 79 (tessera-sim inject) makes TesseraGPUTaintedNoExecute fire.
// Once the pods are gone their series are gone.
func TestPrometheus(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, s)

	type holder struct {
		pod, node   string
		req         resourceapi.ExactDeviceRequest
		util        float64 // percent
		memoryBytes float64
		dev         string
	}
	hs := []*holder{
		{pod: "prom-h100", node: "gpu-h100", req: resourceapi.ExactDeviceRequest{DeviceClassName: "nvidia.gpu.tessera.dev"}, util: 80, memoryBytes: 20 << 30},
		{pod: "prom-mig", node: "gpu-h100-mig", req: resourceapi.ExactDeviceRequest{DeviceClassName: "mig.gpu.tessera.dev"}, util: 30, memoryBytes: 3 << 30},
		{pod: "prom-l4", node: "gpu-l4-shared", req: shareRequest("7Gi"), util: 45, memoryBytes: 6 << 30},
		{pod: "prom-mi300x", node: "gpu-mi300x", req: resourceapi.ExactDeviceRequest{DeviceClassName: "amd.gpu.tessera.dev"}, util: 65, memoryBytes: 90 << 30},
	}
	var pods []string
	for _, h := range hs {
		claimPod(t, ns, h.pod, h.node, h.req)
		pods = append(pods, h.pod)
	}
	if err := scenario.WaitRunning(ctx, client, ns, pods, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		h.dev = allocatedDevice(t, ns, h.pod)
		simLoad(t, h.node, h.dev, fmt.Sprintf("--util=%g", h.util), fmt.Sprintf("--memory=%d", int64(h.memoryBytes)))
		t.Cleanup(func() { simLoad(t, h.node, h.dev, "--clear") })
	}

	// Each pod's telemetry, by its own labels, and the recording rules'.
	for _, h := range hs {
		sel := fmt.Sprintf(`{job=%q,node=%q,device=%q,namespace=%q,pod=%q}`, promJob, h.node, h.dev, ns, h.pod)
		for _, c := range []struct {
			expr string
			want float64
		}{
			{"tessera_gpu_utilization_ratio" + sel, h.util / 100},
			{"tessera_gpu_memory_used_bytes" + sel, h.memoryBytes},
			{fmt.Sprintf(`namespace_pod:tessera_gpu_utilization_ratio:avg{namespace=%q,pod=%q}`, ns, h.pod), h.util / 100},
			{fmt.Sprintf(`namespace_pod:tessera_gpu_memory_used_bytes:sum{namespace=%q,pod=%q}`, ns, h.pod), h.memoryBytes},
		} {
			if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
				got, err := prom.Query(c.expr)
				if err != nil {
					return false, err.Error()
				}
				return len(got) == 1 && got[0].Value == c.want, fmt.Sprintf("%s = %v, want one sample %v", c.expr, got, c.want)
			}); err != nil {
				t.Error(err)
			}
		}
	}

	// top from Prometheus: the same rows as from the agents.
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		var rows []top.Pod
		out := kubectlTessera(t, "top", "pods", "-n", ns, "--prometheus-url", prom.URL(), "-o", "json")
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			return false, err.Error()
		}
		var bad []string
		for _, h := range hs {
			found := false
			for _, r := range rows {
				if r.Pod == h.pod && r.Node == h.node && r.Device == h.dev && r.Utilization != nil && *r.Utilization == h.util/100 {
					found = true
				}
			}
			if !found {
				bad = append(bad, h.pod)
			}
		}
		return len(bad) == 0 && len(rows) == len(hs), fmt.Sprintf("pods %v missing or wrong in %s", bad, out)
	}); err != nil {
		t.Error(err)
	}

	// A GPU of gpu-h100 nobody holds falls off the bus.
	victim := "gpu-7"
	if hs[0].dev == victim {
		victim = "gpu-6"
	}
	t.Cleanup(func() {
		inject(t, "gpu-h100", victim, "--clear")
		waitTaints(t, "gpu-h100", victim, "")
	})
	inject(t, "gpu-h100", victim, "--xid=79", "--message=GPU has fallen off the bus")
	waitTaints(t, "gpu-h100", victim, "xid=79:NoExecute")
	if err := scenario.Poll(ctx, 150*time.Second, func() (bool, string) {
		st, err := prom.AlertState("TesseraGPUTaintedNoExecute", map[string]string{"node": "gpu-h100", "key": "gpu.tessera.dev/xid"})
		if err != nil {
			return false, err.Error()
		}
		return st == "firing", "TesseraGPUTaintedNoExecute on gpu-h100: " + orNone(st)
	}); err != nil {
		t.Error(err)
	}

	// Every dashboard panel shows something, at All and at this namespace.
	checkDashboard(t, prom, ns)

	deleteAll(t, ns)
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		got, err := prom.Query(fmt.Sprintf(`{__name__=~"tessera_gpu_.+|tessera_device_allocation_info",namespace=%q}`, ns))
		if err != nil {
			return false, err.Error()
		}
		return len(got) == 0, fmt.Sprintf("%d series still name the deleted pods", len(got))
	}); err != nil {
		t.Error(err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// checkDashboard runs every panel query of the chart's dashboard against
// prom, with $node at All and $namespace at All and at ns.
func checkDashboard(t *testing.T, prom *prometheus, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "deployments/helm/tessera/dashboards/tessera-gpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			for _, namespace := range []string{".*", ns} {
				expr := strings.NewReplacer("$node", ".*", "$namespace", namespace).Replace(q.Expr)
				n++
				if err := scenario.Poll(context.Background(), 30*time.Second, func() (bool, string) {
					got, err := prom.Query(expr)
					if err != nil {
						return false, err.Error()
					}
					return len(got) > 0, "no series"
				}); err != nil {
					t.Errorf("panel %q: %s: %v", p.Title, expr, err)
				}
			}
		}
	}
	t.Logf("%d dashboard queries returned series", n)
}
