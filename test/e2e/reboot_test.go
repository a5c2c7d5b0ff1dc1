package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// sharePod creates a pod on node with its own claim for a 7Gi share of an
// L4 and returns the claim's UID.
func sharePod(t *testing.T, ns, name, node string) string {
	t.Helper()
	return claimPod(t, ns, name, node, shareRequest("7Gi"))
}

// TestNodeReboot: both nodes whose claims change the hardware reboot at
// once (localcluster.RebootNode: new boot id, partitions, MIG mode, MPS
// daemons, CDI specs and containers gone, kubelet and agent restarted).
// Every pod runs again in a new container, its claim prepared anew: the
// slice carved again, the shares under a new MPS daemon with their
// limits, and the checkpoints hold nothing from before the boot.
func TestNodeReboot(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	nodeOf := map[string]string{"slice": dynamicNode, "share-a": sharedNode, "share-b": sharedNode}
	pods := []string{"slice", "share-a", "share-b"}
	uids := map[string]string{"slice": migPod(t, ns, "slice", dynamicNode, "1g.10gb")}
	for _, p := range pods[1:] {
		uids[p] = sharePod(t, ns, p, sharedNode)
	}
	if err := scenario.WaitRunning(ctx, client, ns, pods, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	ps := simState(t, dynamicNode).partitions
	if len(ps) != 1 {
		t.Fatalf("partitions while the slice runs: %+v, want one", ps)
	}
	oldSlice := ps[0]
	oldDaemon := map[string]int{} // pod -> its MPS daemon's pid
	for _, p := range pods[1:] {
		oldDaemon[p] = daemonPID(t, pipeOf(t, container(t, ns, p)))
		if !processAlive(oldDaemon[p]) {
			t.Fatalf("share %s: MPS daemon %d not running before the reboot", p, oldDaemon[p])
		}
	}
	oldBoot := map[string]string{}
	for _, n := range []string{dynamicNode, sharedNode} {
		for _, p := range pods {
			if nodeOf[p] == n && !specExists(n, uids[p]) {
				t.Fatalf("claim of %s has no CDI spec before the reboot", p)
			}
		}
		b, err := sim.ReadBootID(simDir(n))
		if err != nil {
			t.Fatal(err)
		}
		if cp := readCheckpoint(t, n); cp.BootID != b {
			t.Fatalf("node %s: checkpoint boot id %q, the node's %q", n, cp.BootID, b)
		}
		oldBoot[n] = b
	}

	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, n := range []string{dynamicNode, sharedNode} {
		if err := cluster.RebootNode(s, n); err != nil {
			t.Fatal(err)
		}
	}
	rebooted := time.Since(start)
	for _, p := range pods[1:] {
		if processAlive(oldDaemon[p]) {
			t.Errorf("MPS daemon %d of %s survived the reboot", oldDaemon[p], p)
		}
	}
	if err := scenario.Poll(ctx, 180*time.Second, func() (bool, string) {
		var waiting []string
		for _, p := range pods {
			if why := runningSince(ctx, ns, p, start); why != "" {
				waiting = append(waiting, p+": "+why)
			}
		}
		return len(waiting) == 0, fmt.Sprint(waiting)
	}); err != nil {
		t.Fatalf("pods after the reboot: %v", err)
	}
	t.Logf("reboot of %s and %s to every pod Running again: %s (of which stopping and starting the nodes' processes %s)",
		dynamicNode, sharedNode, time.Since(start).Round(time.Millisecond), rebooted.Round(time.Millisecond))

	// The slice was carved again, under the new boot, and the container
	// sees that partition.
	ps = simState(t, dynamicNode).partitions
	if len(ps) != 1 || ps[0].profile != "1g.10gb" || ps[0].uuid == oldSlice.uuid {
		t.Fatalf("partitions after the reboot: %+v; want one 1g.10gb, not the old %s", ps, oldSlice.uuid)
	}
	if env, _ := container(t, ns, "slice").Getenv("NVIDIA_VISIBLE_DEVICES"); env != ps[0].uuid {
		t.Errorf("slice container after the reboot: NVIDIA_VISIBLE_DEVICES=%q, want the new partition %s", env, ps[0].uuid)
	}
	// The shares run under a new daemon, limited again.
	newDaemon := map[int]bool{}
	for _, p := range pods[1:] {
		ctr := container(t, ns, p)
		pid := daemonPID(t, pipeOf(t, ctr))
		newDaemon[pid] = true
		if pid == oldDaemon[p] || !processAlive(pid) {
			t.Errorf("share %s after the reboot: MPS daemon pid %d (before %d), running %v; want a new, running one", p, pid, oldDaemon[p], processAlive(pid))
		}
		if v, _ := ctr.Getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); v != "0=7168M" {
			t.Errorf("share %s after the reboot: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%q, want 0=7168M", p, v)
		}
	}
	// Nothing from before the boot is left.
	for _, n := range []string{dynamicNode, sharedNode} {
		boot, err := sim.ReadBootID(simDir(n))
		if err != nil {
			t.Fatal(err)
		}
		cp := readCheckpoint(t, n)
		if boot == oldBoot[n] || cp.BootID != boot {
			t.Errorf("node %s: boot id %s (before %s), checkpoint's %s; want a new one, checkpointed", n, boot, oldBoot[n], cp.BootID)
		}
		for uid, c := range cp.Claims {
			if c.Unconfirmed || c.State != checkpoint.PrepareCompleted {
				t.Errorf("node %s: claim %s/%s (%s) left %s, unconfirmed %v after the reboot", n, c.Namespace, c.Name, uid, c.State, c.Unconfirmed)
			}
		}
		for _, p := range pods {
			if nodeOf[p] == n && (cp.Claims[uids[p]] == nil || !specExists(n, uids[p])) {
				t.Errorf("claim of %s after the reboot: in the checkpoint %v, CDI spec %v", p, cp.Claims[uids[p]] != nil, specExists(n, uids[p]))
			}
		}
	}

	// What the new boot's claims hold goes with them: the carved slice,
	// MIG mode, the daemon.
	deleteAll(t, ns)
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		for _, p := range pods {
			if _, held := checkpointClaims(t, nodeOf[p])[uids[p]]; held {
				return false, "claim of " + p + " still prepared"
			}
		}
		for pid := range newDaemon {
			if processAlive(pid) {
				return false, fmt.Sprintf("MPS daemon %d still running", pid)
			}
		}
		st := simState(t, dynamicNode)
		return len(st.partitions) == 0 && !st.migOn[oldSlice.gpu], fmt.Sprintf("partitions %+v, MIG on %v", st.partitions, st.migOn[oldSlice.gpu])
	}); err != nil {
		t.Errorf("after the pods went: %v", err)
	}
}

// runningSince says why pod is not running in a container started at or
// after since ("" when it is): its phase, readiness, or a container not
// yet created again.
func runningSince(ctx context.Context, ns, pod string, since time.Time) string {
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if p.Status.Phase != corev1.PodRunning {
		return string(p.Status.Phase)
	}
	if !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}) {
		return "not ready"
	}
	for _, cs := range p.Status.ContainerStatuses {
		// StartedAt has whole seconds.
		if r := cs.State.Running; r == nil || r.StartedAt.Time.Before(since.Truncate(time.Second)) {
			return "container " + cs.Name + " not started again"
		}
	}
	rec, err := record.Read(cluster.RecordDir(p.Spec.NodeName), ns, pod, "work")
	if err != nil || rec.CreatedAt.Before(since) {
		return "container not created again"
	}
	return ""
}

// container is the record of the work container of pod.
func container(t *testing.T, ns, pod string) *record.Container {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := record.Read(cluster.RecordDir(p.Spec.NodeName), ns, pod, "work")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pipeOf is the MPS pipe directory a container mounts.
func pipeOf(t *testing.T, c *record.Container) string {
	t.Helper()
	for _, m := range c.Mounts {
		if m.Destination == mpsPipeInContainer {
			return m.Source
		}
	}
	t.Fatalf("container of %s: no MPS pipe mount in %+v", c.PodName, c.Mounts)
	return ""
}

func readCheckpoint(t *testing.T, node string) *checkpoint.Checkpoint {
	t.Helper()
	cp, err := checkpoint.Read(cluster.CheckpointPath(node))
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
