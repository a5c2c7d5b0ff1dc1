package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

// The chart's Grafana dashboard, deployments/helm/tessera/dashboards: the
// ConfigMap it ships in, and every panel's PromQL evaluated by promtool's
// engine over series shaped as the agents export them, with the shipped
// recording rules, so that each panel shows something on a fleet of both
// vendors. Grafana itself does not run here.

const dashboardFile = "tessera-gpus.json"

var dashboardPath = filepath.Join(repo, "deployments/helm/tessera/dashboards", dashboardFile)

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			AllValue string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ X, Y, W, H int } `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) ([]byte, *dashboard) {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return data, &d
}

// TestDashboard: no ConfigMap by default; enabled, one in the namespace
// asked with the sidecar's label, holding the file as it is. The file: the
// data source, node and namespace variables; every panel on the data
// source variable, inside the 24-column grid, and with a query.
func TestDashboard(t *testing.T) {
	data, d := readDashboard(t)
	if n := len(helmchart.Find(render(t), "ConfigMap", "tessera-dashboard")); n != 0 {
		t.Errorf("%d dashboard ConfigMaps by default", n)
	}
	cm := one[corev1.ConfigMap](t, render(t, "dashboard.enabled=true", "dashboard.namespace=monitoring"), "ConfigMap", "tessera-dashboard")
	if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || cm.Labels["app.kubernetes.io/name"] != "tessera" {
		t.Errorf("ConfigMap namespace %q, labels %v", cm.Namespace, cm.Labels)
	}
	var got, want any
	if err := json.Unmarshal([]byte(cm.Data[dashboardFile]), &got); err != nil {
		t.Fatalf("the ConfigMap's %s: %v", dashboardFile, err)
	}
	_ = json.Unmarshal(data, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the ConfigMap's %s differs from the file", dashboardFile)
	}

	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["node"] != "query" || vars["namespace"] != "query" {
		t.Errorf("variables %v, want datasource, node and namespace", vars)
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %q, want ${datasource}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q query %s: empty", p.Title, q.RefID)
			}
			queries++
		}
	}
	if queries < 10 {
		t.Errorf("%d queries; the dashboard lost its panels", queries)
	}
}

// fleetSeries are the agents' series of two nodes as a Prometheus scraping
// them with the chart's ServiceMonitor has them: node-a, NVIDIA, with a
// whole H100 ml/train-0 holds and a dynamic H100 whose 3g.40gb instance
// ml/mig-job holds (one of its free memory slices unusable), one GPU tainted after an XID; node-b, AMD, an
// MI300X two serve pods share.
var fleetSeries = []struct{ series, values string }{
	{`tessera_published_devices{node="node-a",vendor="nvidia",model="H100",type="gpu"}`, "2x20"},
	{`tessera_published_devices{node="node-a",vendor="nvidia",model="H100",type="partition"}`, "1x20"},
	{`tessera_published_devices{node="node-b",vendor="amd",model="MI300X",type="gpu"}`, "1x20"},
	{`tessera_gpus_unhealthy{node="node-a"}`, "0x20"},
	{`tessera_gpus_unhealthy{node="node-b"}`, "0x20"},
	{`tessera_gpu_taints{node="node-a",key="gpu.tessera.dev/xid",effect="NoSchedule"}`, "1x20"},
	{`tessera_health_events_total{node="node-a",kind="xid",code="79"}`, "0+1x20"},
	{`tessera_device_allocation_info{node="node-a",device="gpu-0",uuid="GPU-a0",claim_namespace="ml",claim="train",namespace="ml",pod="train-0",container="main"}`, "1x20"},
	{`tessera_device_allocation_info{node="node-a",device="gpu-1-mig-3g-40gb-0",uuid="MIG-a1",parent_uuid="GPU-a1",gpu_instance="1",profile="3g.40gb",claim_namespace="ml",claim="mig",namespace="ml",pod="mig-job",container="main"}`, "1x20"},
	{`tessera_device_allocation_info{node="node-b",device="gpu-0",uuid="b0",claim_namespace="serve",claim="a",namespace="serve",pod="infer-a",container="server",share_id="s1"}`, "1x20"},
	{`tessera_device_allocation_info{node="node-b",device="gpu-0",uuid="b0",claim_namespace="serve",claim="b",namespace="serve",pod="infer-b",container="server",share_id="s2"}`, "1x20"},
	{`tessera_gpu_utilization_ratio{node="node-a",device="gpu-0",uuid="GPU-a0",namespace="ml",pod="train-0"}`, "0.75x20"},
	{`tessera_gpu_memory_used_bytes{node="node-a",device="gpu-0",uuid="GPU-a0",namespace="ml",pod="train-0"}`, "42949672960x20"},
	{`tessera_gpu_memory_total_bytes{node="node-a",device="gpu-0",uuid="GPU-a0",namespace="ml",pod="train-0"}`, "85899345920x20"},
	{`tessera_gpu_temperature_celsius{node="node-a",device="gpu-0",uuid="GPU-a0",namespace="ml",pod="train-0"}`, "61x20"},
	{`tessera_gpu_power_watts{node="node-a",device="gpu-0",uuid="GPU-a0",namespace="ml",pod="train-0"}`, "450x20"},
	{`tessera_gpu_power_limit_watts{node="node-a",device="gpu-0",uuid="GPU-a0",namespace="ml",pod="train-0"}`, "700x20"},
	{`tessera_gpu_memory_total_bytes{node="node-a",device="gpu-1",uuid="GPU-a1"}`, "85899345920x20"},
	{`tessera_gpu_temperature_celsius{node="node-a",device="gpu-1",uuid="GPU-a1"}`, "40x20"},
	{`tessera_gpu_memory_used_bytes{node="node-a",device="gpu-1-mig-3g-40gb-0",uuid="MIG-a1",namespace="ml",pod="mig-job"}`, "8589934592x20"},
	{`tessera_gpu_memory_total_bytes{node="node-a",device="gpu-1-mig-3g-40gb-0",uuid="MIG-a1",namespace="ml",pod="mig-job"}`, "42949672960x20"},
	{`tessera_mig_free_memory_slices{node="node-a",device="gpu-1"}`, "4x20"},
	{`tessera_mig_unusable_memory_slices{node="node-a",device="gpu-1"}`, "1x20"},
	{`tessera_gpu_utilization_ratio{node="node-b",device="gpu-0",uuid="b0"}`, "0.5x20"},
	{`tessera_gpu_memory_used_bytes{node="node-b",device="gpu-0",uuid="b0"}`, "21474836480x20"},
	{`tessera_gpu_memory_total_bytes{node="node-b",device="gpu-0",uuid="b0"}`, "206158430208x20"},
	{`tessera_gpu_temperature_celsius{node="node-b",device="gpu-0",uuid="b0"}`, "50x20"},
	{`tessera_gpu_power_watts{node="node-b",device="gpu-0",uuid="b0"}`, "300x20"},
	{`tessera_gpu_power_limit_watts{node="node-b",device="gpu-0",uuid="b0"}`, "750x20"},
}

// TestDashboardQueries: every panel query, with its variables at All and
// at one node and namespace, returns series from the fleet (promtool test
// rules: an alert on absent(query) that must not fire), beside a control
// query on a metric nobody exports, whose alert must.
func TestDashboardQueries(t *testing.T) {
	_, d := readDashboard(t)
	dir := t.TempDir()
	rulesData, _, _ := readRules(t)
	if err := os.WriteFile(filepath.Join(dir, rulesFile), rulesData, 0o644); err != nil {
		t.Fatal(err)
	}
	type alert struct {
		Alert string `json:"alert"`
		Expr  string `json:"expr"`
	}
	alerts := []alert{{"Control", "absent(tessera_no_such_metric)"}}
	tests := []map[string]any{{"eval_time": "15m", "alertname": "Control", "exp_alerts": []map[string]any{{"exp_labels": map[string]string{}}}}}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			for variant, vars := range map[string]*strings.Replacer{
				"All": strings.NewReplacer("$node", ".*", "$namespace", ".*"),
				"One": strings.NewReplacer("$node", "node-a", "$namespace", "ml"),
			} {
				expr := vars.Replace(q.Expr)
				if strings.Contains(expr, "$") && !strings.Contains(expr, `"$1"`) {
					t.Errorf("panel %q: a variable the test does not know in %s", p.Title, expr)
				}
				name := fmt.Sprintf("Panel%d%s%s", p.ID, q.RefID, variant)
				alerts = append(alerts, alert{name, "absent(" + expr + ")"})
				tests = append(tests, map[string]any{"eval_time": "15m", "alertname": name, "exp_alerts": []any{}})
			}
		}
	}
	var input []map[string]string
	for _, s := range fleetSeries {
		input = append(input, map[string]string{"series": strings.Replace(s.series, "{", `{job="tessera-metrics",instance="agent",`, 1), "values": s.values})
	}
	write := func(name string, v any) {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dashboard.rules.yaml", map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": alerts}}})
	write("dashboard.test.yaml", map[string]any{
		"rule_files":          []string{rulesFile, "dashboard.rules.yaml"},
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": input, "alert_rule_test": tests}},
	})
	promtool(t, dir, "check", "rules", "dashboard.rules.yaml")
	out := promtool(t, dir, "test", "rules", "dashboard.test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
}
