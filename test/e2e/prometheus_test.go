package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/internal/inspect/top"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// promJob is the agents' job as the chart's ServiceMonitor names it, the
// job the shipped rules say.
const promJob = "tessera-metrics"

// prometheus is a real Prometheus server (hack/build-prometheus.sh)
// scraping every agent of the local cluster each second, with the chart's
// rules, as the chart's ServiceMonitor and PrometheusRule set one up: job
// tessera-metrics, the node label, honor_labels, HTTPS with a token.
type prometheus struct {
	t    *testing.T
	base string
}

func startPrometheus(t *testing.T, s *localcluster.State) *prometheus {
	t.Helper()
	return startPrometheusWith(t, s, agentsJob(s, promJob, map[string]any{"type": "Bearer", "credentials_file": cluster.MetricsTokenFile()}))
}

// agentsJob is a scrape config of every agent as the chart's
// ServiceMonitor makes it, named name, with authorization (nil: none):
// HTTPS, the node label, honor_labels. The agents' certificates are the
// cluster CA's, so verified rather than skipped.
func agentsJob(s *localcluster.State, name string, authorization map[string]any) map[string]any {
	var targets []any
	for _, n := range nodes {
		targets = append(targets, map[string]any{"targets": []string{localcluster.MetricsAddress(s, n.Name)}, "labels": map[string]string{"node": n.Name}})
	}
	job := map[string]any{
		"job_name": name, "honor_labels": true, "static_configs": targets,
		"scheme":     "https",
		"tls_config": map[string]any{"ca_file": cluster.MetricsCAFile()},
	}
	if authorization != nil {
		job["authorization"] = authorization
	}
	return job
}

// startPrometheusWith starts Prometheus with the chart's rules scraping
// jobs (agentsJob).
func startPrometheusWith(t *testing.T, s *localcluster.State, jobs ...map[string]any) *prometheus {
	t.Helper()
	bin := filepath.Join(repo, "_output/cluster-bin/prometheus")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("prometheus: %v (make prometheus builds it)", err)
	}
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(repo, "deployments/helm/tessera/rules/tessera.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tessera.rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{"tessera.rules.yaml"},
		"scrape_configs": jobs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := localcluster.PrometheusAddress(s)
	log, err := os.Create(filepath.Join(cluster.LogDir(), "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		log.Close()
	})
	p := &prometheus{t: t, base: "http://" + addr}
	if err := scenario.Poll(context.Background(), 60*time.Second, func() (bool, string) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Sprintf("prometheus exited: %v (log in %s)", err, log.Name())
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// api GETs a Prometheus HTTP API path and decodes its data into v.
func (p *prometheus) api(path string, q url.Values, v any) error {
	resp, err := http.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s %v: %s", path, q, r.Error)
	}
	return json.Unmarshal(r.Data, v)
}

// promSample is one sample of an instant vector.
type promSample struct {
	labels map[string]string
	value  float64
}

// query runs an instant query.
func (p *prometheus) query(expr string) ([]promSample, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.api("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	out := make([]promSample, 0, len(data.Result))
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v", expr, r.Value)
		}
		out = append(out, promSample{r.Metric, v})
	}
	return out, nil
}

// alertState is the state of alert name with labels, "" when there is none.
func (p *prometheus) alertState(name string, labels map[string]string) (string, error) {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.api("/api/v1/alerts", nil, &data); err != nil {
		return "", err
	}
	for _, a := range data.Alerts {
		if a.Labels["alertname"] != name {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && a.Labels[k] == v
		}
		if match {
			return a.State, nil
		}
	}
	return "", nil
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
				got, err := prom.query(c.expr)
				if err != nil {
					return false, err.Error()
				}
				return len(got) == 1 && got[0].value == c.want, fmt.Sprintf("%s = %v, want one sample %v", c.expr, got, c.want)
			}); err != nil {
				t.Error(err)
			}
		}
	}

	// top from Prometheus: the same rows as from the agents.
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		var rows []top.Pod
		out := kubectlTessera(t, "top", "pods", "-n", ns, "--prometheus-url", prom.base, "-o", "json")
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
		st, err := prom.alertState("TesseraGPUTaintedNoExecute", map[string]string{"node": "gpu-h100", "key": "gpu.tessera.dev/xid"})
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
		got, err := prom.query(fmt.Sprintf(`{__name__=~"tessera_gpu_.+|tessera_device_allocation_info",namespace=%q}`, ns))
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
					got, err := prom.query(expr)
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
