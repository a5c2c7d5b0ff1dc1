package health

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Discovery's verdict reaches the taints: lost NoExecute, degraded
// NoSchedule, and a clean read clears it (but not the watch's own).
func TestDiscoveredVerdict(t *testing.T) {
	lost := inventory.Health{State: inventory.Unhealthy, Lost: true, Reason: "GPU is lost: nvmlDeviceGetMemoryInfo: ERROR_GPU_IS_LOST"}
	degraded := inventory.Health{State: inventory.Unhealthy, Reason: "nvmlDeviceGetMinorNumber: ERROR_UNKNOWN"}
	healthy := inventory.Health{State: inventory.Healthy}
	for _, tc := range []struct {
		name    string
		steps   []inventory.Health
		watch   bool // the health watch reported the GPU lost too
		want    string
		changed bool // by the last step
		state   inventory.HealthState
	}{
		{"lost", []inventory.Health{lost}, false, "gpu.tessera.dev/discovery=lost:NoExecute", true, inventory.Unhealthy},
		{"degraded", []inventory.Health{degraded}, false, "gpu.tessera.dev/discovery=degraded:NoSchedule", true, inventory.Unhealthy},
		{"healthy", []inventory.Health{healthy}, false, "", false, inventory.Healthy},
		{"same verdict twice changes nothing", []inventory.Health{degraded, degraded}, false, "gpu.tessera.dev/discovery=degraded:NoSchedule", false, inventory.Unhealthy},
		{"read cleanly again", []inventory.Health{lost, healthy}, false, "", true, inventory.Healthy},
		{"a clean read leaves the watch's loss", []inventory.Health{lost, healthy}, true, "gpu.tessera.dev/lost=true:NoExecute", true, inventory.Unhealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(DefaultPolicy())
			if tc.watch {
				tr.Observe("GPU-1", backend.HealthEvent{UUID: "GPU-1", Kind: backend.HealthLost})
			}
			var changed bool
			for _, h := range tc.steps {
				changed = tr.Discovered("GPU-1", h)
			}
			got := ""
			for _, ts := range tr.Taints("GPU-1") {
				got += ts.Key + "=" + ts.Value + ":" + string(ts.Effect)
			}
			if got != tc.want || changed != tc.changed || tr.Health("GPU-1").State != tc.state {
				t.Errorf("taints %q changed %v health %s; want %q %v %s", got, changed, tr.Health("GPU-1").State, tc.want, tc.changed, tc.state)
			}
		})
	}
}
