package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// migPod creates a pod on node with its own claim for one MIG slice of
// profile and returns the claim's UID.
func migPod(t *testing.T, ns, name, node, profile string) string {
	t.Helper()
	return claimPod(t, ns, name, node, resourceapi.ExactDeviceRequest{
		DeviceClassName: "mig.gpu.tessera.dev",
		Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].profile == "` + profile + `"`}}},
	})
}

// TestDynamicRestartSweepsOrphansKeepsClaims: a partition cut while the
// plugin was down (here written into the simulated hardware's state, as
// `nvidia-smi mig -cgi` would cut it) is destroyed when the plugin starts;
// the partition of a running pod's claim survives the restart, and goes
// with the pod.
func TestDynamicRestartSweepsOrphansKeepsClaims(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	uid := migPod(t, ns, "slice", dynamicNode, "1g.10gb")
	if err := scenario.WaitRunning(ctx, client, ns, []string{"slice"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	before := simState(t, dynamicNode).partitions
	if len(before) != 1 {
		t.Fatalf("partitions while the pod runs: %+v, want one", before)
	}
	owned := before[0]

	restartPlugin(t, dynamicNode, func() {
		addOrphan(t, dynamicNode, owned.gpu, owned.start)
		if n := len(simState(t, dynamicNode).partitions); n != 2 {
			t.Fatalf("orphan not written: %d partitions", n)
		}
	})
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		ps := simState(t, dynamicNode).partitions
		return len(ps) == 1 && ps[0].uuid == owned.uuid, "orphan not destroyed, or the claim's partition gone"
	}); err != nil {
		t.Fatal(err)
	}
	if st := checkpointClaims(t, dynamicNode)[uid]; st != "PrepareCompleted" {
		t.Fatalf("after restart the claim is %q", st)
	}
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if n := scrape(t, localcluster.MetricsURL(s, dynamicNode)).value("tessera_orphan_partitions_destroyed_total"); n != 1 {
		t.Errorf("tessera_orphan_partitions_destroyed_total = %v after the restart, want 1", n)
	}
	uid2 := migPod(t, ns, "slice-after", dynamicNode, "1g.10gb")
	if err := scenario.WaitRunning(ctx, client, ns, []string{"slice", "slice-after"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(simState(t, dynamicNode).partitions); n != 2 {
		t.Errorf("%d partitions with two pods running, want 2", n)
	}
	deleteAll(t, ns)
	for _, u := range []string{uid, uid2} {
		if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
			_, held := checkpointClaims(t, dynamicNode)[u]
			return !held, "still prepared"
		}); err != nil {
			t.Errorf("claim %s: %v", u, err)
		}
	}
	st := simState(t, dynamicNode)
	if len(st.partitions) != 0 || st.migOn[owned.gpu] {
		t.Errorf("after the pods: partitions %+v, MIG on %v; want none, off", st.partitions, st.migOn[owned.gpu])
	}
}

// addOrphan writes a 1g.10gb partition at a free slice of gpu into the
// node's simulated state (the plugin is down, so nothing else writes it).
func addOrphan(t *testing.T, node, gpu string, taken int) {
	t.Helper()
	path := filepath.Join(cluster.NodeDir(node), "sim", "state.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	start := 0
	if taken == 0 {
		start = 1
	}
	for _, g := range doc["gpus"].([]any) {
		g := g.(map[string]any)
		if g["uuid"] != gpu {
			continue
		}
		parts, _ := g["partitions"].([]any)
		g["partitions"] = append(parts, map[string]any{
			"Kind": "mig", "Profile": "1g.10gb", "Placement": map[string]any{"Start": start, "Size": 1},
			"UUID": "MIG-0e2e0000-0000-4000-8000-000000000001", "GPUInstanceID": 7 + start, "ComputeInstanceID": 0,
		})
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
