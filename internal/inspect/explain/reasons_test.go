package explain

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// alternativesReason consumes the firstAvailable alternatives of one
// request and says where the next request starts; it always moves on.
func TestAlternativesReasonAdvances(t *testing.T) {
	tests := []struct {
		name   string
		reqs   []RequestReport
		i      int
		next   int
		reason bool
	}{
		{
			name: "two alternatives, neither enough",
			reqs: []RequestReport{
				{Claim: "c", Request: "gpu/h100", Alternative: 1, Problem: "no such class"},
				{Claim: "c", Request: "gpu/a100", Alternative: 2, Problem: "no such class"},
				{Claim: "c", Request: "other"},
			},
			next: 2, reason: true,
		},
		{
			name: "one enough",
			reqs: []RequestReport{
				{Claim: "c", Request: "gpu/h100", Alternative: 1, Problem: "no such class"},
				{Claim: "c", Request: "gpu/a100", Alternative: 2, Enough: true},
			},
			next: 2,
		},
		{
			name: "a name without its parent's prefix",
			reqs: []RequestReport{
				{Claim: "c", Request: "odd", Alternative: 1, Problem: "no such class"},
				{Claim: "c", Request: "gpu/a100", Alternative: 2, Problem: "no such class"},
			},
			next: 1, reason: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, next := alternativesReason(tt.reqs, tt.i)
			if next != tt.next {
				t.Errorf("next = %d, want %d", next, tt.next)
			}
			if (reason != "") != tt.reason {
				t.Errorf("reason %q, want one: %v", reason, tt.reason)
			}
		})
	}
}

func TestWindowReason(t *testing.T) {
	dev := func(name string) inspect.PoolDevice {
		return inspect.PoolDevice{Pool: "node-1", Dev: &resourceapi.Device{Name: name}}
	}
	node := &inspect.NodeDevices{Name: "node-1",
		Devices: []inspect.PoolDevice{dev("gpu-0"), dev("gpu-1"), dev("gpu-2"), dev("gpu-2-mig-1g-10gb-5"), dev("gpu-10")},
		CounterSets: map[inspect.DeviceKey]resourceapi.CounterSet{
			{Pool: "node-1", Name: "gpu-0"}: {}, {Pool: "node-1", Name: "gpu-1"}: {}, {Pool: "node-1", Name: "gpu-2"}: {}, {Pool: "node-1", Name: "gpu-10"}: {},
		}}
	claim := func(class string) []RequestReport { return []RequestReport{{Request: "r", Class: class}} }
	got := windowReason(node, claim("mig.gpu.tessera.dev"))
	if !strings.Contains(got, "gpu-0, gpu-1, gpu-10 are not published") || !strings.Contains(got, "--dynamic-window") {
		t.Errorf("MIG claim: %q", got)
	}
	if got := windowReason(node, claim("nvidia.gpu.tessera.dev")); got != "" {
		t.Errorf("whole-GPU claim: %q, want none", got)
	}
	node.Devices = append(node.Devices, dev("gpu-0-mig-7g-80gb-0"), dev("gpu-1-mig-1g-10gb-0"), dev("gpu-10-mig-1g-10gb-0"))
	if got := windowReason(node, claim("mig.gpu.tessera.dev")); got != "" {
		t.Errorf("every GPU open: %q, want none", got)
	}
}

// TestModeConflictWords: a device blocked by a GPU's mode tokens is named
// a mode conflict, with who holds the GPU; other counters keep their words.
func TestModeConflictWords(t *testing.T) {
	tally := newRequestTally(RequestReport{Claim: "c", Request: "r"})
	short := []counterKey{{pool: "mi300x-0", set: "gpu-2", counter: publish.ModeTokenPrefix + "0-3"}}
	tally.countersExhausted(short, map[counterKey][]string{short[0]: {"default/notebook"}})
	rep := tally.report(requestSpec{})
	if len(rep.Counters) != 1 || !rep.Counters[0].ModeConflict {
		t.Fatalf("counters %+v, want one mode conflict", rep.Counters)
	}
	got := counterWords(rep.Counters[0])
	if !strings.Contains(got, "GPU gpu-2 (pool mi300x-0) is taken in another compute partition mode, or whole, held by default/notebook") {
		t.Errorf("mode conflict: %q", got)
	}
	slice := CounterReport{Pool: "dyn-0", CounterSet: "gpu-7", Counters: []string{"memory-slice-6"}, Devices: 1}
	if got := counterWords(slice); strings.Contains(got, "mode") {
		t.Errorf("memory slices: %q", got)
	}
}
