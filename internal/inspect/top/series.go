package top

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics top reads (docs/metrics.md).
const (
	metricAllocation  = "tessera_device_allocation_info"
	metricMemoryUsed  = "tessera_gpu_memory_used_bytes"
	metricMemoryTotal = "tessera_gpu_memory_total_bytes"
	metricUtilization = "tessera_gpu_utilization_ratio"
	metricTemperature = "tessera_gpu_temperature_celsius"
	metricPower       = "tessera_gpu_power_watts"
	metricPowerLimit  = "tessera_gpu_power_limit_watts"
)

var wanted = map[string]bool{
	metricAllocation: true, metricMemoryUsed: true, metricMemoryTotal: true, metricUtilization: true,
	metricTemperature: true, metricPower: true, metricPowerLimit: true,
}

// Query is the PromQL instant query of every series top reads.
const Query = `{__name__=~"tessera_device_allocation_info|tessera_gpu_(memory_used_bytes|memory_total_bytes|utilization_ratio|temperature_celsius|power_watts|power_limit_watts)"}`

// Series is one sample of a metric top reads.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseText reads the series top wants from an agent's /metrics (the
// Prometheus text format). node fills a missing node label: every agent
// series top reads carries one, but a hand-run agent's is whatever its
// --node-name was, and the caller knows which node it asked.
func ParseText(r io.Reader, node string) ([]Series, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	var out []Series
	for name, f := range fams {
		if !wanted[name] {
			continue
		}
		for _, m := range f.GetMetric() {
			v, ok := value(f.GetType(), m)
			if !ok {
				continue
			}
			l := make(map[string]string, len(m.GetLabel())+1)
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["node"] == "" {
				l["node"] = node
			}
			out = append(out, Series{Name: name, Labels: l, Value: v})
		}
	}
	return out, nil
}

func value(t dto.MetricType, m *dto.Metric) (float64, bool) {
	switch t {
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), true
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// queryResponse is the Prometheus HTTP API's answer to an instant query
// (/api/v1/query).
type queryResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// ParseQuery reads an instant query's vector. A scrape without
// honor_labels renames the agent's namespace, pod and container labels
// exported_* (the target's own win); top takes the agent's.
func ParseQuery(body []byte) ([]Series, error) {
	var r queryResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("read the Prometheus answer: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s: %s", r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus: a %q result, want a vector", r.Data.ResultType)
	}
	out := make([]Series, 0, len(r.Data.Result))
	for _, s := range r.Data.Result {
		name := s.Metric["__name__"]
		if !wanted[name] {
			continue
		}
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		l := make(map[string]string, len(s.Metric))
		for k, val := range s.Metric {
			if k != "__name__" {
				l[k] = val
			}
		}
		for _, k := range []string{"namespace", "pod", "container"} {
			if e, ok := l["exported_"+k]; ok {
				l[k] = e
				delete(l, "exported_"+k)
			}
		}
		out = append(out, Series{Name: name, Labels: l, Value: v})
	}
	return out, nil
}
