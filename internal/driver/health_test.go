package driver

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// publishedTaints returns the taints of device name in the fake API
// server's slices, as "key=value:Effect".
func (n *node) publishedTaints(name string) string {
	n.t.Helper()
	l, err := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, s := range l.Items {
		for _, d := range s.Spec.Devices {
			if d.Name != name {
				continue
			}
			for _, t := range d.Taints {
				out = append(out, t.Key+"="+t.Value+":"+string(t.Effect))
			}
		}
	}
	return strings.Join(out, ",")
}

// A health signal becomes a taint on the GPU and every partition of it, in
// the slices the API server has, and goes when the GPU recovers.
func TestHealthTaintsPublished(t *testing.T) {
	n := newNode(t, "dgx-h100-mig") // gpu-6: 7x 1g.10gb
	// A GPU in MIG mode is published as its partitions only.
	var gpu string
	var parts []string
	for name, e := range n.driver.Published().Devices {
		if strings.HasPrefix(name, "gpu-6-") {
			gpu = e.GPU.UUID
			parts = append(parts, name)
		}
	}
	if len(parts) != 7 {
		t.Fatalf("partitions of gpu-6: %v", parts)
	}
	inject := func(ev backend.HealthEvent) {
		ev.UUID = gpu
		waitFor(t, func() bool { return n.backend.HealthWatchers() > 0 })
		n.backend.InjectHealth(ev)
	}
	inject(backend.HealthEvent{Kind: backend.HealthXID, Code: 13})
	inject(backend.HealthEvent{Kind: backend.HealthXID, Code: 79})
	want := "gpu.tessera.dev/xid=79:NoExecute"
	waitFor(t, func() bool { return n.publishedTaints(parts[0]) == want })
	for _, p := range parts {
		if got := n.publishedTaints(p); got != want {
			t.Errorf("partition %s taints %q, want %q", p, got, want)
		}
	}
	if got := n.publishedTaints("gpu-0"); got != "" {
		t.Errorf("healthy gpu-0 has taints %q", got)
	}
	inject(backend.HealthEvent{Kind: backend.HealthRecovered})
	waitFor(t, func() bool { return n.publishedTaints(parts[0]) == "" })
}
