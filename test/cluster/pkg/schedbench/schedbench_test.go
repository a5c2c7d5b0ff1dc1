package schedbench

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/internal/alloctest"
)

// TestLayoutsFit allocates each layout's claim on one template node with
// the scheduler's allocator until it fits no more, as the benchmark's
// pods would without a republish: how many pods a node takes is what
// sizes a run (pods/nodes must stay below it), and a layout whose claim
// fits nowhere would time out instead of measuring.
func TestLayoutsFit(t *testing.T) {
	want := map[string]int{
		"static":             8,  // whole H100s
		"static-mig":         9,  // dgx-h100-mig: seven 1g.10gb on GPU 6, two on GPU 7
		"dynamic":            56, // seven 1g.10gb placements on each of 8 GPUs
		"dynamic-window":     14, // the window's 2 GPUs, until the agent opens the next
		"shared":             12, // 7Gi shares: three of each of 4 L4s (24Gi)
		"nvidia-dynamic":     56, // NVIDIA's layout: every placement, seven 1g.10gb on each of 8 GPUs
		"amd-static":         8,  // whole MI300Xs
		"amd-dynamic":        64, // eight CPX partitions on each of 8 GPUs (the tokens of one mode are disjoint)
		"amd-dynamic-window": 16, // the window's 2 GPUs, eight CPX each, until the agent opens the next
	}
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	classes = append(classes, alloctest.NVIDIAClasses()...)
	for _, l := range Layouts {
		t.Run(l.Name, func(t *testing.T) {
			ctx := context.Background()
			objs, err := template(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			c := alloctest.NewCluster(objs, classes)
			n := 0
			for ; n <= 80; n++ { // above every count in want
				req := l.Claim
				req.AllocationMode, req.Count = resourceapi.DeviceAllocationModeExactCount, 1
				claim := &resourceapi.ResourceClaim{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", n), Namespace: namespace, UID: types.UID(fmt.Sprint("uid-", n))},
					Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}},
				}
				res, err := c.Allocate(ctx, "template", claim)
				if err != nil {
					t.Fatal(err)
				}
				if res == nil {
					break
				}
			}
			if w, ok := want[l.Name]; !ok {
				t.Fatalf("layout %s: no expected count", l.Name)
			} else if n != w {
				t.Errorf("layout %s: %d pods fit a node, want %d", l.Name, n, w)
			}
		})
	}
}
