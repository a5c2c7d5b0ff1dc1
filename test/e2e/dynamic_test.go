package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sim"
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
	uid, owned := runningSlice(t, ns, "slice")

	restartPlugin(t, dynamicNode, func() {
		addOrphan(t, dynamicNode, owned.gpu, owned.start, false)
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
	if st := checkpointClaims(t, dynamicNode)[uid]; st != checkpoint.PrepareCompleted {
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

// runningSlice runs a pod named name with a 1g.10gb slice on the dynamic
// node, which must hold no other partition, and returns its claim's UID and
// the partition carved for it.
func runningSlice(t *testing.T, ns, name string) (string, simPartition) {
	t.Helper()
	uid := migPod(t, ns, name, dynamicNode, "1g.10gb")
	if err := scenario.WaitRunning(context.Background(), client, ns, []string{name}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	ps := simState(t, dynamicNode).partitions
	if len(ps) != 1 {
		t.Fatalf("partitions while the pod runs: %+v, want one", ps)
	}
	return uid, ps[0]
}

// addOrphan cuts a 1g.10gb partition at a free slice of gpu (0, or 1 when
// taken is 0) in the node's simulated state, as `nvidia-smi mig -cgi
// 1g.10gb -C` would behind the agent's back, and returns its UUID and
// start. With inUse, a process outside Kubernetes holds it, so it cannot be
// destroyed. The plugin must be down (nothing else writes the state then).
func addOrphan(t *testing.T, node, gpu string, taken int, inUse bool) (string, int) {
	t.Helper()
	const uuid = "MIG-0e2e0000-0000-4000-8000-000000000001"
	start := 0
	if taken == 0 {
		start = 1
	}
	err := sim.EditState(simDir(node), gpu, func(g *sim.GPUState) {
		g.Partitions = append(g.Partitions, inventory.Partition{
			Kind: inventory.PartitionMIG, Profile: "1g.10gb", Placement: inventory.Placement{Start: start, Size: 1},
			UUID: uuid, GPUInstanceID: 7 + start,
		})
		if inUse {
			g.InUse = append(g.InUse, uuid)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return uuid, start
}

// TestDynamicStuckOrphanWithheld: a partition no claim owns that cannot be
// destroyed (a process outside Kubernetes holds it) survives the plugin's
// start-up sweep. Its memory slice is then published as used up in its
// GPU's counter set, so the real scheduler fills the GPU around it and
// every pod runs; without that it would pick the blocked placement and the
// pod's prepare would fail forever. Once the process lets go, the plugin
// destroys it and turns MIG mode back off.
func TestDynamicStuckOrphanWithheld(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, owned := runningSlice(t, ns, "first")
	var stuck string
	var stuckAt int
	restartPlugin(t, dynamicNode, func() {
		stuck, stuckAt = addOrphan(t, dynamicNode, owned.gpu, owned.start, true)
	})
	set := gpuDeviceName(t, dynamicNode, owned.gpu)
	slice := fmt.Sprintf("memory-slice-%d", stuckAt)
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		v, ok := counterValue(t, dynamicNode, set, slice)
		return ok && v == 0, fmt.Sprintf("counter %s/%s = %d (published %v), want 0", set, slice, v, ok)
	}); err != nil {
		t.Fatal(err)
	}
	if !slicesHas(simState(t, dynamicNode).partitions, stuck) {
		t.Fatal("the held orphan was destroyed")
	}

	// The GPU the first slice opened takes the next 1g.10gb slices; with
	// the first and the stuck one there, 5 more fit and the 6th opens
	// another GPU. All must run.
	names := []string{"first"}
	for i := range 6 {
		name := fmt.Sprintf("more-%d", i)
		migPod(t, ns, name, dynamicNode, "1g.10gb")
		names = append(names, name)
	}
	if err := scenario.WaitRunning(ctx, client, ns, names, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	onGPU := 0
	for _, p := range simState(t, dynamicNode).partitions {
		if p.gpu == owned.gpu {
			onGPU++
		}
	}
	if onGPU != 7 {
		t.Errorf("%d partitions on %s (the stuck one included), want 7: the GPU filled around it", onGPU, set)
	}

	deleteAll(t, ns)
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		return len(checkpointClaims(t, dynamicNode)) == 0, "claims still prepared"
	}); err != nil {
		t.Fatal(err)
	}
	restartPlugin(t, dynamicNode, func() {
		if err := sim.EditState(simDir(dynamicNode), owned.gpu, func(g *sim.GPUState) { g.InUse = nil }); err != nil {
			t.Fatal(err)
		}
	})
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		st := simState(t, dynamicNode)
		return len(st.partitions) == 0 && !st.migOn[owned.gpu], fmt.Sprintf("partitions %+v, MIG on %v", st.partitions, st.migOn[owned.gpu])
	}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		v, ok := counterValue(t, dynamicNode, set, slice)
		return ok && v == 1, fmt.Sprintf("counter %s/%s = %d", set, slice, v)
	}); err != nil {
		t.Error(err)
	}
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if n := scrape(t, localcluster.MetricsURL(s, dynamicNode)).value("tessera_orphan_partitions_destroyed_total"); n != 1 {
		t.Errorf("tessera_orphan_partitions_destroyed_total = %v after the last restart, want 1", n)
	}
}

// gpuDeviceName is the published name (gpu-<n>) of the whole GPU with uuid.
func gpuDeviceName(t *testing.T, node, uuid string) string {
	t.Helper()
	for _, s := range nodeSlices(t, node) {
		for _, d := range s.Spec.Devices {
			if str(d, "type") == "gpu" && str(d, "uuid") == uuid {
				return d.Name
			}
		}
	}
	t.Fatalf("GPU %s is not published on %s", uuid, node)
	return ""
}

// counterValue reads one counter of a published counter set.
func counterValue(t *testing.T, node, set, counter string) (int64, bool) {
	t.Helper()
	for _, s := range nodeSlices(t, node) {
		for _, cs := range s.Spec.SharedCounters {
			if c, ok := cs.Counters[counter]; ok && cs.Name == set {
				return c.Value.Value(), true
			}
		}
	}
	return 0, false
}

func slicesHas(ps []simPartition, uuid string) bool {
	for _, p := range ps {
		if p.uuid == uuid {
			return true
		}
	}
	return false
}
