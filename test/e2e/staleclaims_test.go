package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestStaleClaimReleasedAfterKubeletRestart: a pod's claim is prepared,
// the node's kubelet goes down, the pod and its claim are deleted, and a
// new pod's claim is allocated the same GPU (pinned by its UUID). When the
// kubelet comes back the old claim is still prepared (only the kubelet's
// reconcile, about a minute later, would unprepare it); the new claim's
// prepare finds the GPU held, GETs the holder, finds it deleted and
// releases it (docs/operating.md#stale-claims). The new pod runs well
// within the reconcile, and the old claim's spec and checkpoint entry are
// gone by then.
func TestStaleClaimReleasedAfterKubeletRestart(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const node = "gpu-h100"
	// Far under the kubelet's 60 s reconcile, far over the release (one
	// GET and an unprepare) plus the kubelet's restart and retry.
	const bound = 20 * time.Second

	oldUID := gpuPod(t, ns, "old", node)
	if err := scenario.WaitRunning(ctx, client, ns, []string{"old"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	dev := allocatedDevice(t, ns, "old")
	uuid := str(device(t, node, dev), "uuid")
	if uuid == "" {
		t.Fatalf("device %s has no uuid", dev)
	}
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	url := localcluster.MetricsURL(s, node)
	before := scrape(t, url)

	kubelet, err := cluster.StopKubelet(s, node)
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).Delete(ctx, "old", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := client.ResourceV1().ResourceClaims(ns).Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		_, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "old", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("claim old: %v", err)
	}); err != nil {
		t.Fatal(err)
	}
	newUID := claimPod(t, ns, "new", node, *celRequest("gpu.tessera.dev", fmt.Sprintf(`device.attributes["gpu.tessera.dev"].uuid == %q`, uuid)))
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "new", metav1.GetOptions{})
		return err == nil && c.Status.Allocation != nil, fmt.Sprintf("claim new not allocated (%v)", err)
	}); err != nil {
		t.Fatal(err)
	}
	if got := allocatedDevice(t, ns, "new"); got != dev {
		t.Fatalf("new claim got %s, want the old claim's %s", got, dev)
	}
	if _, held := checkpointClaims(t, node)[oldUID]; !held || !specExists(node, oldUID) {
		t.Fatal("the old claim was unprepared while the kubelet was down: nothing left to test")
	}

	if err := cluster.StartKubelet(s, kubelet); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := scenario.WaitRunning(ctx, client, ns, []string{"new"}, bound); err != nil {
		t.Fatalf("new pod not running %s after the kubelet restart: %v", bound, err)
	}
	t.Logf("new pod running %s after the kubelet restart", time.Since(restarted).Round(100*time.Millisecond))
	if _, held := checkpointClaims(t, node)[oldUID]; held || specExists(node, oldUID) {
		t.Errorf("the old claim: checkpoint entry %v, CDI spec %v; want both gone", held, specExists(node, oldUID))
	}
	if !specExists(node, newUID) {
		t.Error("the new claim has no CDI spec")
	}
	after := scrape(t, url)
	name := "tessera_stale_claims_released_total"
	if d := after.value(name, "evidence", "deleted") - before.value(name, "evidence", "deleted"); d != 1 {
		t.Errorf("%s{evidence=deleted} rose by %v, want 1", name, d)
	}
	deleteAll(t, ns)
}
