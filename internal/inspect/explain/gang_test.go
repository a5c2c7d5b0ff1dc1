package explain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tessera-gpu/tessera/internal/alloctest"
)

const h100 = `device.attributes["gpu.tessera.dev"].model == "H100"`

// gangInput is a PodGroup of workers pods in namespace ns. perPod: each
// pod its own claim of one H100 from a template; otherwise one pod-group
// claim with a request per worker, on one fabric island.
func gangInput(in *Input, name string, workers int, perPod bool) {
	one := func(req string) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: req, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "gpu.tessera.dev", Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: h100}}}}}
	}
	tmpl := resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu", Namespace: "ns"}}
	pg := schedulingapi.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: schedulingapi.PodGroupSpec{SchedulingPolicy: schedulingapi.PodGroupSchedulingPolicy{Gang: &schedulingapi.GangSchedulingPolicy{MinCount: int32(workers)}}}}
	if perPod {
		tmpl.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{one("gpu")}
	} else {
		for i := range workers {
			tmpl.Spec.Spec.Devices.Requests = append(tmpl.Spec.Spec.Devices.Requests, one(fmt.Sprintf("worker-%d", i)))
		}
		tmpl.Spec.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.tessera.dev/fabricIsland"))}}
		pg.Spec.ResourceClaims = []schedulingapi.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}}
	}
	in.Templates = append(in.Templates, tmpl)
	in.PodGroups = append(in.PodGroups, pg)
	for i := range workers {
		in.Pods = append(in.Pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-worker-%d", name, i), Namespace: "ns"},
			Spec: corev1.PodSpec{
				SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)},
				ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}},
			},
		})
	}
}

// A gang is explained as a whole, members placed one at a time with the
// real allocator, each holding its devices: the fleet has 16 whole H100s
// (dgx-0, and dyn-0's, which also publishes MIG placements).
func TestRunGang(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		perPod  bool
		// busy H100s on dgx-0, held by claims outside the gang.
		busy      int
		fits      bool
		stuckAt   string // the member explained, when it does not fit
		sameNode  bool
		wantWords []string
	}{
		{name: "12 workers fit on 16", workers: 12, perPod: true, fits: true},
		{name: "12 workers, 6 GPUs busy", workers: 12, perPod: true, busy: 6, stuckAt: "big-worker-10",
			wantWords: []string{"member 11 of 12 fits on no node once the 10 before it hold their devices", "in use (by ns/big-worker-"}},
		{name: "pod-group claim, 8 on one island", workers: 8, fits: true, sameNode: true},
		{name: "pod-group claim, 8 on one island, 1 busy", workers: 8, busy: 1, fits: true, sameNode: true},
		{name: "pod-group claim, 9 on one island", workers: 9, stuckAt: "big-worker-0",
			wantWords: []string{"member 1 of 9 fits on no node", "fabricIsland"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newExplainFleet(t)
			for i := range tt.busy {
				f.allocate(t, "dgx-0", wholeClaim(fmt.Sprintf("busy-%d", i)))
			}
			in := f.input()
			gangInput(in, "big", tt.workers, tt.perPod)
			if g := in.GangTarget("ns", "pod/big-worker-3"); g != "big" {
				t.Fatalf("GangTarget(pod/big-worker-3) = %q, want big", g)
			}
			gx, err := RunGang(context.Background(), in, "ns", "big")
			if err != nil {
				t.Fatal(err)
			}
			if gx.Fits != tt.fits {
				t.Fatalf("Fits = %v, want %v\n%s", gx.Fits, tt.fits, gangText(gx))
			}
			// No device twice among the members placed.
			seen := map[string]string{}
			nodes := map[string]bool{}
			for _, m := range gx.Placed {
				nodes[m.Node] = true
				for _, p := range m.Devices {
					k := p.Pool + "/" + p.Device
					if prev, ok := seen[k]; ok {
						t.Errorf("%s given to %s and %s", k, prev, m.Pod)
					}
					seen[k] = m.Pod
				}
			}
			if tt.fits && len(gx.Placed) != tt.workers {
				t.Errorf("%d members placed, want %d", len(gx.Placed), tt.workers)
			}
			if tt.sameNode && len(nodes) != 1 {
				t.Errorf("members on %d nodes, want one (the group's claim's)", len(nodes))
			}
			if tt.stuckAt == "" {
				if gx.Stuck != nil {
					t.Errorf("Stuck = %+v for a gang that fits", gx.Stuck)
				}
				return
			}
			if gx.Stuck == nil || gx.Stuck.Pod != tt.stuckAt {
				t.Fatalf("Stuck = %+v, want pod %s", gx.Stuck, tt.stuckAt)
			}
			if fit := gx.Stuck.Fitting(); len(fit) != 0 {
				t.Errorf("the stuck member fits on %v", fit)
			}
			checkConsistent(t, gx.Stuck)
			text := gangText(gx)
			for _, w := range tt.wantWords {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

func wholeClaim(name string) *resourceapi.ResourceClaim {
	return alloctest.Claim(name, alloctest.Request{Name: "gpu", Class: "nvidia.gpu.tessera.dev", CEL: []string{h100}})
}
