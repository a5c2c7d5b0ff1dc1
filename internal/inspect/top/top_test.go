package top

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

// sample is a telemetry reading of the fields given as field, value pairs.
func sample(uuid string, kv ...float64) telemetry.Sample {
	s := telemetry.Sample{UUID: uuid}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Set(telemetry.Field(kv[i]), kv[i+1])
	}
	return s
}

const gi = 1 << 30

var (
	mem, total, util = float64(telemetry.MemoryUsedBytes), float64(telemetry.MemoryTotalBytes), float64(telemetry.UtilizationPercent)
	temp, power, lim = float64(telemetry.TemperatureCelsius), float64(telemetry.PowerWatts), float64(telemetry.PowerLimitWatts)
)

// fleet serves real agent metrics registries: an H100 node whose gpu-0 a
// training pod holds (two containers), gpu-1 idle, and gpu-2 in MIG mode
// with one 3g.40gb instance held; and an L4 node whose gpu-0 two pods
// share with capacity shares.
func fleet(t *testing.T) map[string]string {
	h100 := metrics.New()
	h100.SetAllocationSource(func() []metrics.DeviceAllocation {
		return []metrics.DeviceAllocation{
			{Node: "gpu-h100", Device: "gpu-0", UUID: "GPU-0", ClaimNamespace: "team-a", Claim: "train-gpu", Namespace: "team-a", Pod: "train-0", Container: "trainer"},
			{Node: "gpu-h100", Device: "gpu-0", UUID: "GPU-0", ClaimNamespace: "team-a", Claim: "train-gpu", Namespace: "team-a", Pod: "train-0", Container: "profiler"},
			{Node: "gpu-h100", Device: "gpu-2-mig-3g-40gb-4", UUID: "MIG-2", ParentUUID: "GPU-2", GPUInstance: "2", Profile: "3g.40gb",
				ClaimNamespace: "team-b", Claim: "slice", Namespace: "team-b", Pod: "infer", Container: "server"},
		}
	})
	h100.SetTelemetrySource(func() []metrics.DeviceTelemetry {
		return []metrics.DeviceTelemetry{
			{Node: "gpu-h100", Device: "gpu-0", UUID: "GPU-0", Namespace: "team-a", Pod: "train-0",
				Sample: sample("GPU-0", mem, 30*gi, total, 80*gi, util, 70, temp, 61, power, 450, lim, 700)},
			{Node: "gpu-h100", Device: "gpu-1", UUID: "GPU-1", Sample: sample("GPU-1", mem, 0, total, 80*gi, util, 0, temp, 35, power, 70, lim, 700)},
			{Node: "gpu-h100", Device: "gpu-2", UUID: "GPU-2", Sample: sample("GPU-2", total, 80*gi, temp, 40, power, 90, lim, 700)},
			{Node: "gpu-h100", Device: "gpu-2-mig-3g-40gb-4", UUID: "MIG-2", Namespace: "team-b", Pod: "infer",
				Sample: sample("MIG-2", mem, 4*gi, total, 40*gi)},
		}
	})
	l4 := metrics.New()
	l4.SetAllocationSource(func() []metrics.DeviceAllocation {
		return []metrics.DeviceAllocation{
			{Node: "gpu-l4", Device: "gpu-0", UUID: "GPU-L", ClaimNamespace: "team-c", Claim: "a", Namespace: "team-c", Pod: "chat", Container: "c", ShareID: "s1"},
			{Node: "gpu-l4", Device: "gpu-0", UUID: "GPU-L", ClaimNamespace: "team-d", Claim: "b", Namespace: "team-d", Pod: "embed", Container: "c", ShareID: "s2"},
		}
	})
	l4.SetTelemetrySource(func() []metrics.DeviceTelemetry {
		return []metrics.DeviceTelemetry{{Node: "gpu-l4", Device: "gpu-0", UUID: "GPU-L",
			Sample: sample("GPU-L", mem, 12*gi, total, 24*gi, util, 50, temp, 55, power, 40, lim, 72)}}
	})
	urls := map[string]string{}
	for node, m := range map[string]*metrics.Metrics{"gpu-h100": h100, "gpu-l4": l4} {
		srv := httptest.NewServer(m.Handler())
		t.Cleanup(srv.Close)
		urls[node] = srv.URL + "/metrics"
	}
	return urls
}

var shares = Shares{
	{"team-c", "a", "gpu-l4", "gpu-0", "s1"}: 8 * gi,
	{"team-d", "b", "gpu-l4", "gpu-0", "s2"}: 4 * gi,
}

func gather(t *testing.T, o Options) *Top {
	t.Helper()
	res, err := Gather(context.Background(), fake.NewClientset(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("warnings: %v", res.Warnings)
	}
	return Build(res.Series, shares)
}

func TestTopPods(t *testing.T) {
	top := gather(t, Options{MetricsURLs: fleet(t)})
	for _, c := range []struct{ output, sortBy, want string }{
		{"", "", `NAMESPACE  POD      NODE      DEVICE               UTIL  MEMORY(USED/ALLOWED)
team-a     train-0  gpu-h100  gpu-0                70%   30Gi/80Gi
team-b     infer    gpu-h100  gpu-2-mig-3g-40gb-4  -     4Gi/40Gi
team-c     chat     gpu-l4    gpu-0                50%*  12Gi/8Gi*
team-d     embed    gpu-l4    gpu-0                50%*  12Gi/4Gi*

* the whole device's readings: other pods share it, and the hardware reports none per pod
`},
		{"", SortMemory, `NAMESPACE  POD      NODE      DEVICE               UTIL  MEMORY(USED/ALLOWED)
team-a     train-0  gpu-h100  gpu-0                70%   30Gi/80Gi
team-c     chat     gpu-l4    gpu-0                50%*  12Gi/8Gi*
team-d     embed    gpu-l4    gpu-0                50%*  12Gi/4Gi*
team-b     infer    gpu-h100  gpu-2-mig-3g-40gb-4  -     4Gi/40Gi

* the whole device's readings: other pods share it, and the hardware reports none per pod
`},
		{inspect.OutputWide, SortUtilization, `NAMESPACE  POD      NODE      DEVICE               UTIL  MEMORY(USED/ALLOWED)  TEMP  POWER  CLAIM             CONTAINERS        SHARE  UUID
team-a     train-0  gpu-h100  gpu-0                70%   30Gi/80Gi             61C   450W   team-a/train-gpu  profiler,trainer  -      GPU-0
team-c     chat     gpu-l4    gpu-0                50%*  12Gi/8Gi*             55C   40W    team-c/a          c                 s1     GPU-L
team-d     embed    gpu-l4    gpu-0                50%*  12Gi/4Gi*             55C   40W    team-d/b          c                 s2     GPU-L
team-b     infer    gpu-h100  gpu-2-mig-3g-40gb-4  -     4Gi/40Gi              -     -      team-b/slice      server            -      MIG-2

* the whole device's readings: other pods share it, and the hardware reports none per pod
`},
	} {
		var b bytes.Buffer
		if err := PrintPods(&b, top, c.output, c.sortBy); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("top pods -o %q --sort-by %q:\n%s\nwant\n%s", c.output, c.sortBy, b.String(), c.want)
		}
	}
}

func TestTopNodes(t *testing.T) {
	top := gather(t, Options{MetricsURLs: fleet(t)})
	var b bytes.Buffer
	if err := PrintNodes(&b, top, inspect.OutputWide, ""); err != nil {
		t.Fatal(err)
	}
	// The H100 node: three GPUs (the MIG instance counts in its GPU), two
	// in use; utilization the mean of the two that report one.
	want := `NODE      GPUS  IN-USE  PODS  UTIL  MEMORY(USED/TOTAL)  POWER(DRAW/LIMIT)  MAX-TEMP
gpu-h100  3     2       2     35%   30Gi/240Gi          610W/2100W         61C
gpu-l4    1     1       2     50%   12Gi/24Gi           40W/72W            55C
`
	if b.String() != want {
		t.Errorf("top nodes -o wide:\n%s\nwant\n%s", b.String(), want)
	}
}

// A node that does not answer is a warning; the others are shown. None
// answering is an error naming each.
func TestGatherNodeDown(t *testing.T) {
	urls := fleet(t)
	urls["gpu-gone"] = "http://127.0.0.1:1/metrics"
	res, err := Gather(context.Background(), fake.NewClientset(), Options{MetricsURLs: urls})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "node gpu-gone: ") {
		t.Errorf("warnings %v, want one for gpu-gone", res.Warnings)
	}
	if top := Build(res.Series, nil); len(top.Nodes) != 2 {
		t.Errorf("nodes %+v, want the two that answered", top.Nodes)
	}
	_, err = Gather(context.Background(), fake.NewClientset(), Options{MetricsURLs: map[string]string{"gpu-gone": "http://127.0.0.1:1/metrics"}})
	if err == nil || !strings.Contains(err.Error(), "no agent answered") || !strings.Contains(err.Error(), "gpu-gone") {
		t.Errorf("all down: %v", err)
	}
}

// ParseQuery reads the Prometheus API's vector; a scrape without
// honor_labels has the agent's pod labels as exported_*.
func TestParseQuery(t *testing.T) {
	body := `{"status":"success","data":{"resultType":"vector","result":[
	 {"metric":{"__name__":"tessera_gpu_utilization_ratio","node":"n1","device":"gpu-0","namespace":"tessera-system","pod":"tessera-abc","exported_namespace":"team-a","exported_pod":"train-0"},"value":[1733140000.1,"0.7"]},
	 {"metric":{"__name__":"tessera_device_allocation_info","node":"n1","device":"gpu-0","namespace":"team-a","pod":"train-0","claim_namespace":"team-a","claim":"c"},"value":[1733140000.1,"1"]},
	 {"metric":{"__name__":"up","job":"x"},"value":[1733140000.1,"1"]}]}}`
	s, err := ParseQuery([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || s[0].Value != 0.7 || s[0].Labels["namespace"] != "team-a" || s[0].Labels["pod"] != "train-0" {
		t.Fatalf("series %+v", s)
	}
	top := Build(s, nil)
	if len(top.Pods) != 1 || percent(top.Pods[0].Utilization) != "70%" {
		t.Errorf("pods %+v", top.Pods)
	}
	for _, bad := range []string{`{"status":"error","errorType":"bad_data","error":"parse error"}`, `{"status":"success","data":{"resultType":"matrix","result":[]}}`, `<html>`} {
		if _, err := ParseQuery([]byte(bad)); err == nil {
			t.Errorf("ParseQuery(%s): no error", bad)
		}
	}
}

func TestCheckFlags(t *testing.T) {
	if err := CheckFlags("wide", "memory"); err != nil {
		t.Error(err)
	}
	if err := CheckFlags("csv", ""); err == nil || !strings.Contains(err.Error(), `"csv"`) {
		t.Errorf("-o csv: %v", err)
	}
	if err := CheckFlags("", "cpu"); err == nil || !strings.Contains(err.Error(), "--sort-by") {
		t.Errorf("--sort-by cpu: %v", err)
	}
}
