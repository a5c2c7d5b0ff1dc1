package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

// The chart's Prometheus rules, deployments/helm/tessera/rules: the file
// the PrometheusRule ships, checked and unit-tested with the real promtool
// (hack/build-prometheus.sh), and the PrometheusRule rendered from it.

var rulesDir = filepath.Join(repo, "deployments/helm/tessera/rules")

const (
	rulesFile = "tessera.rules.yaml"
	// The agent's job in the file; the chart puts its release's there.
	rulesJob = `job="tessera-metrics"`
)

// promtool runs promtool in dir and returns its output; a missing promtool
// fails the test.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin := filepath.Join(repo, "_output/cluster-bin/promtool")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("promtool: %v (make prometheus builds it)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readRules(t *testing.T) (data []byte, alerts, records []rule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rulesDir, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := utilyaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r)
			} else {
				records = append(records, r)
			}
		}
	}
	if len(alerts) == 0 || len(records) == 0 {
		t.Fatalf("%s: %d alerts, %d recording rules", rulesFile, len(alerts), len(records))
	}
	return data, alerts, records
}

// TestRulesCheck: promtool finds the file valid, every rule in it, and no
// lint; each alert waits (for), says how bad (severity) and what and where
// (summary, description naming the node).
func TestRulesCheck(t *testing.T) {
	_, alerts, records := readRules(t)
	out := promtool(t, rulesDir, "check", "rules", "--lint=all", "--lint-fatal", rulesFile)
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(alerts)+len(records)); !strings.Contains(out, want) {
		t.Errorf("promtool check rules: want %q in\n%s", want, out)
	}
	for _, a := range alerts {
		if a.For == "" {
			t.Errorf("%s: no for", a.Alert)
		}
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q", a.Alert, s)
		}
		for _, k := range []string{"summary", "description"} {
			if !strings.Contains(a.Annotations[k], "{{ $labels.node }}") {
				t.Errorf("%s: %s %q does not name the node", a.Alert, k, a.Annotations[k])
			}
		}
	}
}

// TestRulesUnit: promtool test rules over rules/tests, which make every
// alert fire and stay quiet (a healthy series, a condition passed or not
// held long enough) and check every recording rule's joined series, all of
// them against the shipped file.
func TestRulesUnit(t *testing.T) {
	_, alerts, records := readRules(t)
	dir := filepath.Join(rulesDir, "tests")
	files, err := filepath.Glob(filepath.Join(dir, "*.test.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests in %s: %v", dir, err)
	}
	fires, quiet, recorded := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf struct {
			RuleFiles []string `json:"rule_files"`
			Tests     []struct {
				Alerts []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
				Exprs []struct {
					Expr       string `json:"expr"`
					ExpSamples []any  `json:"exp_samples"`
				} `json:"promql_expr_test"`
			} `json:"tests"`
		}
		if err := utilyaml.Unmarshal(data, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if want := []string{"../" + rulesFile}; !reflect.DeepEqual(tf.RuleFiles, want) {
			t.Errorf("%s: rule_files %q, want %q (the file the chart ships)", filepath.Base(f), tf.RuleFiles, want)
		}
		for _, tc := range tf.Tests {
			for _, a := range tc.Alerts {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
			for _, e := range tc.Exprs {
				if len(e.ExpSamples) > 0 {
					recorded[e.Expr] = true
				}
			}
		}
	}
	for _, a := range alerts {
		if !fires[a.Alert] || !quiet[a.Alert] {
			t.Errorf("%s: tested firing %v, not firing %v; want both", a.Alert, fires[a.Alert], quiet[a.Alert])
		}
	}
	for _, r := range records {
		if !recorded[r.Record] {
			t.Errorf("%s: no promql_expr_test of its series", r.Record)
		}
	}
	out := promtool(t, dir, append([]string{"test", "rules"}, names...)...)
	if n := strings.Count(out, "SUCCESS"); n != len(names) || strings.Contains(out, "FAILED") {
		t.Errorf("promtool test rules: %d of %d files passed\n%s", n, len(names), out)
	}
}

// groupsOf returns the PrometheusRules of objs' groups; fatal unless there is
// exactly one.
func groupsOf(t *testing.T, objs []*unstructured.Unstructured, name string) (*unstructured.Unstructured, []any) {
	t.Helper()
	pr := helmchart.Find(objs, "PrometheusRule", "")
	if len(pr) != 1 || pr[0].GetName() != name || pr[0].GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Fatalf("want one monitoring.coreos.com/v1 PrometheusRule %s: %v", name, kinds(objs))
	}
	groups, ok, err := unstructured.NestedSlice(pr[0].Object, "spec", "groups")
	if !ok || err != nil {
		t.Fatalf("PrometheusRule spec.groups: %v", err)
	}
	return pr[0], groups
}

// fileGroups: the file's groups with the agent's job replaced by job.
func fileGroups(t *testing.T, data []byte, job string) []any {
	t.Helper()
	var f map[string]any
	if err := utilyaml.Unmarshal([]byte(strings.ReplaceAll(string(data), rulesJob, fmt.Sprintf("job=%q", job))), &f); err != nil {
		t.Fatal(err)
	}
	groups, _ := f["groups"].([]any)
	return groups
}

// TestPrometheusRule: none by default, nor when enabled where the API
// server does not serve monitoring.coreos.com/v1 (unless forced); else the
// file's groups as they are, the release's metrics Service as the job.
func TestPrometheusRule(t *testing.T) {
	data, _, _ := readRules(t)
	jobs := regexp.MustCompile(`job="[^"]*"`).FindAllString(string(data), -1)
	if len(jobs) == 0 || slices.ContainsFunc(jobs, func(j string) bool { return j != rulesJob }) {
		t.Fatalf("the file's jobs %q, want %s only", jobs, rulesJob)
	}

	for _, sets := range [][]string{nil, {"prometheusRule.enabled=true"}, {"prometheusRule.force=true"}} {
		if n := len(helmchart.Find(render(t, sets...), "PrometheusRule", "")); n != 0 {
			t.Errorf("%v: %d PrometheusRules without monitoring.coreos.com/v1", sets, n)
		}
	}

	c := chart(t)
	c.APIVersions = []string{"monitoring.coreos.com/v1"}
	if objs, err := c.Render(ns); err != nil || len(helmchart.Find(objs, "PrometheusRule", "")) != 0 {
		t.Errorf("a PrometheusRule by default where the API is served (%v)", err)
	}
	objs, err := c.Render(ns, "prometheusRule.enabled=true", "prometheusRule.labels.release=prom", "serviceMonitor.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	pr, groups := groupsOf(t, objs, "tessera")
	if pr.GetNamespace() != ns || pr.GetLabels()["release"] != "prom" || pr.GetLabels()["app.kubernetes.io/name"] != "tessera" {
		t.Errorf("PrometheusRule namespace %q, labels %v", pr.GetNamespace(), pr.GetLabels())
	}
	// The ServiceMonitor names no jobLabel, so the operator makes the
	// metrics Service's name the job.
	svc := one[corev1.Service](t, objs, "Service", "tessera-metrics")
	sm := helmchart.Find(objs, "ServiceMonitor", "tessera")
	if _, has, _ := unstructured.NestedFieldNoCopy(sm[0].Object, "spec", "jobLabel"); has {
		t.Errorf("the ServiceMonitor sets jobLabel: the rules' job is not the Service's name")
	}
	if want := fileGroups(t, data, svc.Name); !reflect.DeepEqual(groups, want) {
		t.Errorf("the PrometheusRule's groups differ from %s", rulesFile)
	}

	// Forced without the API; another release's Service; a job given.
	for _, tc := range []struct {
		release, values, job string
	}{
		{"tessera", "prometheusRule: {enabled: true, force: true}", "tessera-metrics"},
		{"gpu", "prometheusRule: {enabled: true, force: true}", "gpu-tessera-metrics"},
		{"tessera", "prometheusRule: {enabled: true, force: true, job: gpu-agents}", "gpu-agents"},
	} {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(tc.values), 0o644); err != nil {
			t.Fatal(err)
		}
		objs, err := chart(t).RenderValues(tc.release, ns, values)
		if err != nil {
			t.Fatal(err)
		}
		name := tc.release
		if name != "tessera" {
			name += "-tessera"
		}
		_, groups := groupsOf(t, objs, name)
		if !reflect.DeepEqual(groups, fileGroups(t, data, tc.job)) {
			t.Errorf("release %s, %s: the groups are not the file's with job %q", tc.release, tc.values, tc.job)
		}
		// What the operator hands Prometheus is a valid rules file.
		js, err := json.Marshal(map[string]any{"groups": groups})
		if err != nil {
			t.Fatal(err)
		}
		rendered := filepath.Join(t.TempDir(), "rendered.rules.json")
		if err := os.WriteFile(rendered, js, 0o644); err != nil {
			t.Fatal(err)
		}
		promtool(t, rulesDir, "check", "rules", "--lint=all", "--lint-fatal", rendered)
		if tc.release != "tessera" || !strings.Contains(tc.values, "job:") {
			if len(helmchart.Find(objs, "Service", tc.job)) != 1 {
				t.Errorf("release %s: no metrics Service %s: %v", tc.release, tc.job, kinds(objs))
			}
		}
	}
}
