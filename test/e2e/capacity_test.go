package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// Checks of demo 14: capacity shares on the node published with
// --sharing=capacity.

const sharedNode = "gpu-l4-shared"

// sharedDaemons are the MPS daemons demo 14's shares ran under (pipe
// directory to pid), for its after-check.
var sharedDaemons = map[string]int{}

func checkShares(t *testing.T, o outcome) {
	ctx := context.Background()
	shares := []string{"share-1", "share-2", "share-3", "share-4"}
	byDevice := map[string][]string{}
	pipeOf := map[string]string{} // pod to the pipe directory it mounts
	for _, name := range shares {
		g := o.pods[name]
		expectDevices(t, g, 1, func(d resourceapi.Device) bool { return str(d, "model") == "L4" })
		if g.placement.Node != sharedNode {
			t.Fatalf("share %s ran on %s, want %s", name, g.placement.Node, sharedNode)
		}
		r := g.placement.Claims[0].Devices[0]
		if mem := r.ConsumedCapacity["memory"]; r.ShareID == nil || mem.Cmp(resource.MustParse("7Gi")) != 0 {
			t.Errorf("share %s: shareID %v, consumed %v; want a ShareID and 7Gi of memory", name, r.ShareID, r.ConsumedCapacity)
		}
		byDevice[r.Device] = append(byDevice[r.Device], name)
		uuid := str(g.devices[0], "uuid")
		ctr := g.placement.Containers[0]
		for k, want := range map[string]string{
			"CUDA_MPS_PIPE_DIRECTORY":          mpsPipeInContainer,
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=7168M",
			"CUDA_VISIBLE_DEVICES":             uuid,
		} {
			if v, _ := ctr.Getenv(k); v != want {
				t.Errorf("share %s: %s=%q, want %q", name, k, v, want)
			}
		}
		if v, ok := ctr.Getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"); ok {
			t.Errorf("memory-only share %s capped at %s%% of threads", name, v)
		}
		for _, m := range ctr.Mounts {
			if m.Destination == mpsPipeInContainer {
				pipeOf[name] = m.Source
			}
		}
		if pipeOf[name] == "" {
			t.Fatalf("share %s: no MPS pipe mount", name)
		}
	}
	var sizes []int
	for dev, pods := range byDevice {
		sizes = append(sizes, len(pods))
		for _, p := range pods[1:] {
			if pipeOf[p] != pipeOf[pods[0]] {
				t.Errorf("shares %s and %s of %s mount different pipe directories", pods[0], p, dev)
			}
		}
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{1, 3}) {
		t.Fatalf("shares by device %v: want three on one L4 and the fourth on the next", byDevice)
	}

	whole := o.pods["whole-l4"]
	expectDevices(t, whole, 1, func(d resourceapi.Device) bool { return str(d, "model") == "L4" })
	if _, shared := byDevice[whole.devices[0].Name]; shared || whole.placement.Node != sharedNode {
		t.Errorf("whole-GPU pod got %s/%s, want an L4 no share is on", whole.placement.Node, whole.devices[0].Name)
	}
	if mem := whole.placement.Claims[0].Devices[0].ConsumedCapacity["memory"]; mem.Cmp(resource.MustParse("23034Mi")) != 0 {
		t.Errorf("whole-GPU claim consumed %s of memory, want all 23034Mi", mem.String())
	}
	if v, ok := whole.placement.Containers[0].Getenv("CUDA_MPS_PIPE_DIRECTORY"); ok {
		t.Errorf("whole-GPU pod runs under MPS (%s)", v)
	}

	for _, p := range pipeOf {
		sharedDaemons[p] = daemonPID(t, p)
	}
	// Each share's claim says how it is held (kubectl describe): by MPS
	// client limits only, not an isolation boundary, and why not by the
	// kernel on this node.
	for _, name := range shares {
		rc, err := client.ResourceV1().ResourceClaims(o.ns).Get(ctx, o.pods[name].placement.Claims[0].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		said := false
		for _, ds := range rc.Status.Devices {
			for _, c := range ds.Conditions {
				said = said || (c.Type == "ShareEnforced" && c.Status == metav1.ConditionFalse && c.Reason == "ProcessLimitsOnly" && ds.ShareID != nil &&
					strings.Contains(c.Message, "not an isolation boundary") && strings.Contains(c.Message, "Not held by the kernel: "))
			}
		}
		if !said {
			t.Errorf("share %s: claim status %+v lacks ShareEnforced=False (ProcessLimitsOnly) with why", name, rc.Status.Devices)
		}
	}

	// Deleting one of the three shares of a GPU unprepares it alone: the
	// other two stay prepared and running under the same daemon.
	var three []string
	for _, pods := range byDevice {
		if len(pods) == 3 {
			three = pods
		}
	}
	uid := func(pod string) string {
		rc, err := client.ResourceV1().ResourceClaims(o.ns).Get(ctx, o.pods[pod].placement.Claims[0].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(rc.UID)
	}
	victim, victimUID := three[0], uid(three[0])
	zero := int64(0)
	if err := client.CoreV1().Pods(o.ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		_, in := checkpointClaims(t, sharedNode)[victimUID]
		return !in && !specExists(sharedNode, victimUID), "deleted share still prepared"
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range three[1:] {
		if st := checkpointClaims(t, sharedNode)[uid(p)]; st != checkpoint.PrepareCompleted || !specExists(sharedNode, uid(p)) {
			t.Errorf("share %s after %s went: checkpoint %q, spec %v", p, victim, st, specExists(sharedNode, uid(p)))
		}
	}
	if err := scenario.WaitRunning(ctx, client, o.ns, three[1:], 5*time.Second); err != nil {
		t.Error(err)
	}
	if pid := daemonPID(t, pipeOf[three[1]]); pid != sharedDaemons[pipeOf[three[1]]] || !processAlive(pid) {
		t.Errorf("the remaining shares' MPS daemon changed or died: pid %d, was %d", pid, sharedDaemons[pipeOf[three[1]]])
	}
}

// daemonPID is the pid of the MPS daemon whose pipes are in pipe (the
// simulator's stand-in records it there).
func daemonPID(t *testing.T, pipe string) int {
	t.Helper()
	st, err := standin.ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	return st.PID
}

// afterShares: once the last share of a GPU went, so did its daemon.
func afterShares(t *testing.T) {
	for pipe, pid := range sharedDaemons {
		if processAlive(pid) {
			t.Errorf("shared MPS daemon pid %d still running after its shares went", pid)
		}
		if _, err := os.Stat(filepath.Dir(pipe)); !os.IsNotExist(err) {
			t.Errorf("shared MPS daemon directory %s still there (%v)", filepath.Dir(pipe), err)
		}
	}
}
