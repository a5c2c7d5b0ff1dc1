package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestMetricsMatchPreparedClaims runs pods with claims on one node, scrapes
// that node's plugin over HTTPS with a token as Prometheus would, and checks that the
// prepare and unprepare counts and the prepared gauges moved by exactly the
// claims this test prepared. Values are compared before and after, so what
// other tests did on the node does not matter.
// TestReadyz: every node's agent reports ready once its real kubelet has
// registered it and its slices are published.
func TestReadyz(t *testing.T) {
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		url := strings.TrimSuffix(localcluster.MetricsURL(s, n.Name), "/metrics") + "/readyz"
		// No token: /readyz is open, as the kubelet's probes need.
		hc := metricsClientWithToken(t, "")
		if err := scenario.Poll(context.Background(), 30*time.Second, func() (bool, string) {
			resp, err := hc.Get(url)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, body)
		}); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}

func TestMetricsMatchPreparedClaims(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const node = "gpu-mi300x"
	const pods = 3
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	url := localcluster.MetricsURL(s, node)

	before := scrape(t, url)
	checkPublished(t, node, before)
	var names []string
	for i := range pods {
		name := fmt.Sprintf("metrics-%d", i)
		gpuPod(t, ns, name, node)
		names = append(names, name)
	}
	if err := scenario.WaitRunning(ctx, client, ns, names, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	held := checkAttribution(t, ns, node, url, names)
	running := scrape(t, url)
	delta := func(a, b samples, name string, labels ...string) float64 {
		return b.value(name, labels...) - a.value(name, labels...)
	}
	want := []check{
		{"successful prepares (histogram count)", delta(before, running, "tessera_prepare_duration_seconds_count", "result", "success"), pods},
		{"failed prepares (histogram count)", delta(before, running, "tessera_prepare_duration_seconds_count", "result", "error"), 0},
		{"prepare errors, all reasons", delta(before, running, "tessera_prepare_errors_total"), 0},
		{"prepared claims", delta(before, running, "tessera_prepared_claims"), pods},
		{"prepared devices", delta(before, running, "tessera_prepared_devices"), pods},
	}
	// The gauge is the checkpoint's count, whatever other tests left there.
	completed := 0
	for _, st := range checkpointClaims(t, node) {
		if st == checkpoint.PrepareCompleted {
			completed++
		}
	}
	want = append(want, check{"prepared claims vs checkpoint", running.value("tessera_prepared_claims"), float64(completed)})
	if sum := delta(before, running, "tessera_prepare_duration_seconds_sum", "result", "success"); sum <= 0 {
		t.Errorf("prepare duration sum grew by %v", sum)
	}

	deleteAll(t, ns)
	// The kubelet unprepares after the pods are gone; wait for the gauge.
	var after samples
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		after = scrape(t, url)
		n := after.value("tessera_prepared_claims")
		return n == before.value("tessera_prepared_claims"), fmt.Sprintf("tessera_prepared_claims %v", n)
	}); err != nil {
		t.Fatal(err)
	}
	// The kubelet stops listing a deleted pod at once; the agent's next
	// poll (localcluster.AttributionPoll) drops its series.
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		left := held(scrape(t, url))
		return len(left) == 0, fmt.Sprintf("tessera_device_allocation_info still names %v", left)
	}); err != nil {
		t.Error(err)
	}
	want = append(want, []check{
		{"successful unprepares (histogram count)", delta(running, after, "tessera_unprepare_duration_seconds_count", "result", "success"), pods},
		{"unprepare errors, all reasons", delta(before, after, "tessera_unprepare_errors_total"), 0},
		{"prepared devices after unprepare", delta(before, after, "tessera_prepared_devices"), 0},
	}...)
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("%s on %s: %v, want %v", w.what, node, w.got, w.want)
		}
	}
}

// checkAttribution waits until node's agent names, in
// tessera_device_allocation_info, each pod of names (gpuPod's: its claim
// of its own name, container "work") with the uuid its device publishes,
// from the kubelet's PodResources API. It returns which of those pods a
// scrape still names.
func checkAttribution(t *testing.T, ns, node, url string, names []string) func(samples) []string {
	t.Helper()
	ctx := context.Background()
	want := map[string]map[string]string{}
	for _, name := range names {
		c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("claim %s/%s: allocation %+v", ns, name, c.Status.Allocation)
		}
		dev := c.Status.Allocation.Devices.Results[0].Device
		want[name] = map[string]string{"node": node, "device": dev, "uuid": str(device(t, node, dev), "uuid"),
			"claim_namespace": ns, "claim": name, "namespace": ns, "pod": name, "container": "work"}
	}
	named := func(m samples) []string {
		var out []string
		for _, name := range names {
			for _, s := range m["tessera_device_allocation_info"] {
				if s.labels["namespace"] == ns && s.labels["pod"] == name {
					out = append(out, name)
					break
				}
			}
		}
		return out
	}
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		m := scrape(t, url)
		var missing []string
	next:
		for _, labels := range want {
			for _, s := range m["tessera_device_allocation_info"] {
				if matches(s.labels, labels) && s.value == 1 {
					continue next
				}
			}
			missing = append(missing, fmt.Sprint(labels))
		}
		return len(missing) == 0, fmt.Sprintf("no series %v among %v", missing, m["tessera_device_allocation_info"])
	}); err != nil {
		t.Fatal(err)
	}
	return named
}

func matches(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// check is one compared value.
type check struct {
	what      string
	got, want float64
}

// checkPublished compares tessera_published_devices with the node's
// ResourceSlices, by vendor, model and type.
func checkPublished(t *testing.T, node string, m samples) {
	t.Helper()
	inSlices := map[[3]string]float64{}
	for _, sl := range nodeSlices(t, node) {
		for _, d := range sl.Spec.Devices {
			inSlices[[3]string{str(d, "vendor"), str(d, "model"), str(d, "type")}]++
		}
	}
	if len(inSlices) == 0 {
		t.Fatalf("node %s publishes no devices", node)
	}
	for k, n := range inSlices {
		if got := m.value("tessera_published_devices", "vendor", k[0], "model", k[1], "type", k[2]); got != n {
			t.Errorf("tessera_published_devices%v = %v, slices have %v", k, got, n)
		}
	}
	if got, want := m.value("tessera_published_devices"), float64(sumOf(inSlices)); got != want {
		t.Errorf("tessera_published_devices total %v, slices have %v", got, want)
	}
}

func sumOf(m map[[3]string]float64) (n float64) {
	for _, v := range m {
		n += v
	}
	return n
}

// samples is one scrape, flattened to Prometheus' sample names: a
// histogram is its _count and _sum (buckets are not needed here).
type samples map[string][]sample

type sample struct {
	labels map[string]string
	value  float64
}

func scrape(t *testing.T, url string) samples {
	t.Helper()
	resp, err := metricsClient(t).Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse scrape of %s: %v", url, err)
	}
	out := samples{}
	for name, f := range fams {
		for _, m := range f.Metric {
			ls := map[string]string{}
			for _, l := range m.Label {
				ls[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = append(out[name], sample{ls, m.Counter.GetValue()})
			case dto.MetricType_GAUGE:
				out[name] = append(out[name], sample{ls, m.Gauge.GetValue()})
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"] = append(out[name+"_count"], sample{ls, float64(m.Histogram.GetSampleCount())})
				out[name+"_sum"] = append(out[name+"_sum"], sample{ls, m.Histogram.GetSampleSum()})
			}
		}
	}
	return out
}

// value sums the samples of name whose labels include labels (name, value
// pairs): with no labels, the total over all series.
func (s samples) value(name string, labels ...string) float64 {
	var sum float64
next:
	for _, x := range s[name] {
		for i := 0; i+1 < len(labels); i += 2 {
			if x.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		sum += x.value
	}
	return sum
}
