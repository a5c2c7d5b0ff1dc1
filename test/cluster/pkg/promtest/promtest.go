// Package promtest runs a real Prometheus server (hack/build-prometheus.sh)
// for the end-to-end suites: scraping a local cluster's agents with the
// chart's rules, as the chart's ServiceMonitor and PrometheusRule set one
// up, and asking it queries and alert states.
package promtest

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
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// Job is the agents' job as the chart's ServiceMonitor names it, the job
// the shipped rules say.
const Job = "tessera-metrics"

// Server is a real Prometheus server scraping agents of a local cluster
// each second, with the chart's rules: job tessera-metrics, the node
// label, honor_labels, HTTPS with a token.
type Server struct {
	t    testing.TB
	base string
}

// URL is the server's base URL (http://host:port).
func (p *Server) URL() string { return p.base }

// Bearer is the authorization of a job whose token is in file.
func Bearer(file string) map[string]any {
	return map[string]any{"type": "Bearer", "credentials_file": file}
}

// AgentsJob is a scrape config of the agents of nodes as the chart's
// ServiceMonitor makes it, named name, with authorization (nil: none):
// HTTPS, the node label, honor_labels. The agents' certificates are the
// cluster CA's, so verified rather than skipped.
func AgentsJob(c *localcluster.Config, s *localcluster.State, nodes []string, name string, authorization map[string]any) map[string]any {
	var targets []any
	for _, n := range nodes {
		targets = append(targets, map[string]any{"targets": []string{localcluster.MetricsAddress(s, n)}, "labels": map[string]string{"node": n}})
	}
	job := map[string]any{
		"job_name": name, "honor_labels": true, "static_configs": targets,
		"scheme":     "https",
		"tls_config": map[string]any{"ca_file": c.MetricsCAFile()},
	}
	if authorization != nil {
		job["authorization"] = authorization
	}
	return job
}

// Start starts Prometheus, from repo's _output, with the chart's rules,
// scraping jobs (AgentsJob) every second; it stops at the test's end.
func Start(t testing.TB, c *localcluster.Config, s *localcluster.State, repo string, jobs ...map[string]any) *Server {
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
	return run(t, c, bin, dir, localcluster.PrometheusAddress(s))
}

// run starts bin in dir and waits until it is ready.
func run(t testing.TB, c *localcluster.Config, bin, dir, addr string) *Server {
	t.Helper()
	log, err := os.Create(filepath.Join(c.LogDir(), "prometheus.log"))
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
	p := &Server{t: t, base: "http://" + addr}
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

// API GETs a Prometheus HTTP API path and decodes its data into v.
func (p *Server) API(path string, q url.Values, v any) error {
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

// Sample is one sample of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant query.
func (p *Server) Query(expr string) ([]Sample, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.API("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(data.Result))
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v", expr, r.Value)
		}
		out = append(out, Sample{r.Metric, v})
	}
	return out, nil
}

// AlertState is the state of alert name with labels ("pending",
// "firing"), "" when there is none.
func (p *Server) AlertState(name string, labels map[string]string) (string, error) {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.API("/api/v1/alerts", nil, &data); err != nil {
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
