package driver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
)

// TestStaleClaimReleasedOverGRPC: a claim prepared for a pod deleted
// while the kubelet was away holds its device until another claim is
// allocated it; that claim's prepare GETs the holder from the API server,
// finds it gone and releases it (spec and checkpoint entry), counted by
// evidence. A holder the API server still has allocated refuses it.
func TestStaleClaimReleasedOverGRPC(t *testing.T) {
	n := newMetricsNode(t, "dgx-h100")
	old, live := n.addClaim("old", "gpu-0"), n.addClaim("live", "gpu-1")
	resp := n.prepare(old, live)
	for _, c := range []string{old.Uid, live.Uid} {
		if e := resp.Claims[c].GetError(); e != "" {
			t.Fatal(e)
		}
	}
	if err := n.client.ResourceV1().ResourceClaims("default").Delete(n.ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(n.cdiDir(), "k8s.gpu.tessera.dev-claim_"+old.Uid+".json")
	if _, err := os.Stat(spec); err != nil {
		t.Fatal(err)
	}

	next, thief := n.addClaim("next", "gpu-0"), n.addClaim("thief", "gpu-1")
	resp = n.prepare(next, thief)
	if e := resp.Claims[next.Uid].GetError(); e != "" {
		t.Errorf("prepare of the claim allocated a deleted claim's device: %s", e)
	}
	if e := resp.Claims[thief.Uid].GetError(); e == "" {
		t.Error("prepare of a device a live claim holds succeeded")
	}
	cp := n.checkpointClaims()
	if _, ok := cp[old.Uid]; ok {
		t.Error("the deleted claim is still in the checkpoint")
	}
	if _, ok := cp[live.Uid]; !ok {
		t.Error("the live claim is gone from the checkpoint")
	}
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Errorf("the deleted claim's CDI spec: %v", err)
	}
	s := metricstest.Scrape(t, n.metrics.Handler())
	expect(t, "released, deleted", s.Value("tessera_stale_claims_released_total", "evidence", metrics.ReleasedDeleted), 1)
	expect(t, "refused", s.Value("tessera_prepare_errors_total", "reason", metrics.ReasonDeviceInUse), 1)
	for _, a := range n.client.Actions() {
		if a.GetResource().Resource == "resourceclaims" && (a.GetVerb() == "list" || a.GetVerb() == "watch") {
			t.Errorf("the agent %s claims", a.GetVerb())
		}
	}
}

// Every evidence the claims manager gives has its metrics label.
func TestReleasedLabels(t *testing.T) {
	for _, ev := range claims.Evidences {
		if l := releasedLabel(ev); !slices.Contains(metrics.Released, l) {
			t.Errorf("evidence %s: label %q, not one of %v", ev, l, metrics.Released)
		}
	}
	if len(releasedLabels) != len(metrics.Released) {
		t.Errorf("%d evidences mapped, %d labels", len(releasedLabels), len(metrics.Released))
	}
}
