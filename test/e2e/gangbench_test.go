package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
)

// BenchmarkGangPlacement is the real scheduler's time to place 8 workers
// of one H100 each, from the first pod's creation to the last one's
// binding (docs/training.md, "Gangs: what it costs"): as 8 independent
// pods, as a gang of 8 with a claim per pod, and as a gang sharing one
// pod-group claim of 8 requests on one fabric island. Run it with
//
//	cd test && go test -run '^$' -bench GangPlacement -count 6 ./e2e/
//
// which starts the e2e cluster once; the pods run on the fake runtime, so
// what is timed is the API server, the scheduler and its allocator.
func BenchmarkGangPlacement(b *testing.B) {
	for _, mode := range []string{"independent", "gang", "gang-island"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			ns := e2eutil.Namespace(b, client, "")
			h100 := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].model == "H100"`}}}
			one := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one"}}
			one.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev", Selectors: h100}}}
			island := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "island"}}
			for i := range 8 {
				island.Spec.Spec.Devices.Requests = append(island.Spec.Spec.Devices.Requests, resourceapi.DeviceRequest{
					Name: fmt.Sprintf("worker-%d", i), Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev", Selectors: h100}})
			}
			island.Spec.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptrTo(resourceapi.FullyQualifiedName("gpu.tessera.dev/fabricIsland"))}}
			for _, t := range []*resourceapi.ResourceClaimTemplate{one, island} {
				if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, t, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				group := fmt.Sprintf("job-%d", i)
				if mode != "independent" {
					pg := &schedulingapi.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: group}, Spec: schedulingapi.PodGroupSpec{
						SchedulingPolicy: schedulingapi.PodGroupSchedulingPolicy{Gang: &schedulingapi.GangSchedulingPolicy{MinCount: 8}}}}
					if mode == "gang-island" {
						pg.Spec.ResourceClaims = []schedulingapi.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("island")}}
					}
					if _, err := client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for k := range 8 {
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", group, k)}, Spec: corev1.PodSpec{
						ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("one")}},
						Containers: []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10",
							Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
					}}
					if mode != "independent" {
						p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptrTo(group)}
					}
					if mode == "gang-island" {
						p.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptrTo("island")
						p.Spec.Containers[0].Resources.Claims[0].Request = fmt.Sprintf("worker-%d", k)
					}
					if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				waitBound(b, w, 8)
				b.StopTimer()
				w.Stop()
				cleanupGroup(b, ns, group, mode != "independent")
				b.StartTimer()
			}
		})
	}
}

// waitBound reads w until n pods have a node.
func waitBound(b *testing.B, w watch.Interface, n int) {
	b.Helper()
	bound := map[string]bool{}
	timeout := time.After(2 * time.Minute)
	for len(bound) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("pod watch closed")
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && p.Spec.NodeName != "" {
				bound[p.Name] = true
			}
		case <-timeout:
			b.Fatalf("%d of %d pods bound after 2m", len(bound), n)
		}
	}
}

// cleanupGroup deletes the iteration's pods (and group) and waits until
// their claims are gone, so the next iteration finds every GPU free.
func cleanupGroup(b *testing.B, ns, group string, hasGroup bool) {
	b.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	if hasGroup {
		if err := client.SchedulingV1beta1().PodGroups(ns).Delete(ctx, group, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, _ := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		c, _ := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		g, _ := client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if len(p.Items) == 0 && len(c.Items) == 0 && len(g.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("cleanup: %d pods, %d claims, %d groups left", len(p.Items), len(c.Items), len(g.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
