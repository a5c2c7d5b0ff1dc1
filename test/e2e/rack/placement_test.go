package rack

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
)

// placementRounds is how many times each shape is placed.
const placementRounds = 3

// TestPlacementTime measures, with the real kube-scheduler, the time from
// creating four workers of four GPUs each to all four bound: as four
// independent pods, and as a job whose workers share an IMEX channel
// claim (which keeps them on the domain's trays), alternating, in one
// cluster. A measurement for docs/rack.md, logged, not asserted; what it
// asserts is the placement: every job worker on a tray, one per tray.
func TestPlacementTime(t *testing.T) {
	ns := e2eutil.Namespace(t, client, "placement")
	var independent, jobs []time.Duration
	for round := range placementRounds {
		for _, withChannel := range []bool{false, true} {
			name := fmt.Sprintf("p%d-%v", round, withChannel)
			start := time.Now()
			pods := workers(t, ns, name, 4, 4, withChannel)
			took, on := waitBound(t, ns, pods, start)
			if withChannel {
				jobs = append(jobs, took)
				slices.Sort(on)
				if !slices.Equal(on, trays) {
					t.Errorf("job %s on %v, want one worker on each tray %v", name, on, trays)
				}
				endJob(t, ns, name, pods)
			} else {
				independent = append(independent, took)
				deletePods(t, ns, pods)
			}
		}
	}
	t.Logf("created to all 4 bound, %d rounds: independent pods %v, a job with its channel %v", placementRounds, independent, jobs)
}

// workers creates n pods in ns, each with a claim of gpus NVIDIA GPUs of
// its own and, withChannel, the job's shared IMEX channel claim.
func workers(t *testing.T, ns, name string, n, gpus int, withChannel bool) []string {
	t.Helper()
	ctx := context.Background()
	claims := []corev1.PodResourceClaim{}
	refs := []corev1.ResourceClaim{}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nvidia.gpu.tessera.dev",
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(gpus)},
		}}}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claims = append(claims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: &tmpl.Name})
	refs = append(refs, corev1.ResourceClaim{Name: "gpu"})
	if withChannel {
		claim := channelClaim(t, ns, name)
		claims = append(claims, corev1.PodResourceClaim{Name: "imex", ResourceClaimName: &claim.Name})
		refs = append(refs, corev1.ResourceClaim{Name: "imex"})
	}
	var pods []string
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i)},
			Spec: corev1.PodSpec{
				ResourceClaims: claims,
				Containers: []corev1.Container{{Name: "work", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Claims: refs}}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p.Name)
	}
	return pods
}

// waitBound polls (every 20ms) until every pod is bound and returns the
// time from start and the pods' nodes.
func waitBound(t *testing.T, ns string, pods []string, start time.Time) (time.Duration, []string) {
	t.Helper()
	ctx := context.Background()
	deadline := start.Add(2 * time.Minute)
	for ; ; time.Sleep(20 * time.Millisecond) {
		var on []string
		for _, name := range pods {
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.Spec.NodeName != "" {
				on = append(on, p.Spec.NodeName)
			}
		}
		if len(on) == len(pods) {
			return time.Since(start), on
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %v: %d of %d bound after 2m", pods, len(on), len(pods))
		}
	}
}
