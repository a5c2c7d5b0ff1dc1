package containerd

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/internal/driverroot"
	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// driverRootControl is the stand-in as the agent and its daemon pods see
// it: the node's driver root (sim.driverRoot) at the chart's mount.
const driverRootControl = "/driver-root/" + localcluster.DriverRootControl

// TestMPSDaemonsRunFromDriverRoot: the MPS daemons of a node's shares run
// the stand-in found in the node's driver root on the host, not the sim
// image's /usr/bin/tessera-sim: each daemon pod mounts the root read-only
// and runs the control program from it, and each running daemon says it
// is that program (the stand-in's status, os.Executable in the pod).
func TestMPSDaemonsRunFromDriverRoot(t *testing.T) {
	node := nodes[2].Name
	ns := namespace(t, "driver-root")
	runScenario(t, ns, "14-gpu-shares-l4.yaml")
	mps := mpsState(t, ns, node)
	if len(mps.daemons) == 0 {
		t.Fatal("no container mounts an MPS daemon's pipes")
	}
	for pipe := range mps.daemons {
		st, err := standin.ReadStatus(pipe)
		if err != nil {
			t.Fatal(err)
		}
		if st.Executable != driverRootControl {
			t.Errorf("MPS daemon of %s runs %q, want the driver root's %s", pipe, st.Executable, driverRootControl)
		}
	}
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: mpsDaemonLabel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) == 0 {
		t.Fatalf("node %s: no MPS daemon pod", node)
	}
	for _, p := range l.Items {
		checkDriverRootPod(t, &p, cluster.DriverRoot(node))
	}
	drain(t, ns)
}

// checkDriverRootPod: p mounts root read-only at /driver-root and runs its
// control program from there.
func checkDriverRootPod(t *testing.T, p *corev1.Pod, root string) {
	t.Helper()
	c := p.Spec.Containers[0]
	if len(c.Command) == 0 || c.Command[0] != driverRootControl {
		t.Errorf("daemon pod %s runs %q, want %s", p.Name, c.Command, driverRootControl)
	}
	vols := p.Spec.Volumes
	if len(vols) != 2 || vols[1].HostPath == nil || vols[1].HostPath.Path != root {
		t.Errorf("daemon pod %s volumes %+v: want the driver root %s second", p.Name, vols, root)
	}
	if len(c.VolumeMounts) != 2 || c.VolumeMounts[1].MountPath != "/driver-root" || !c.VolumeMounts[1].ReadOnly {
		t.Errorf("daemon pod %s mounts %+v: want the driver root read-only at /driver-root", p.Name, c.VolumeMounts)
	}
}

// TestAgentStopsWithoutDriverRootControl: a driver root without the MPS
// control program stops the node's agent at start naming the paths it
// tried, and kubectl tessera doctor's driver check fails naming the node,
// the file and the root, from the agent pod's status alone. The program
// put back, the next agent serves.
func TestAgentStopsWithoutDriverRootControl(t *testing.T) {
	node := nodes[0].Name
	root := cluster.DriverRoot(node)
	if err := cluster.RemoveDriverRootControl(node); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		if err := cluster.RestoreDriverRootControl(node); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(restore)
	old := agentPod(t, node)
	deleteAgentPod(t, old)

	// The new agent's container stops with driverroot's error.
	want := driverroot.MPSControl + " not found under the driver root " + root + " (mounted at /driver-root) (tried " + driverRootControl
	ctx := context.Background()
	if err := scenario.Poll(ctx, 120*time.Second, func() (bool, string) {
		msg := lastAgentMessage(ctx, node, old.UID)
		return strings.Contains(msg, want), "agent's last termination message: " + msg
	}); err != nil {
		t.Fatalf("node %s: %v", node, err)
	}

	out, err := exec.Command(filepath.Join(repo, "bin/kubectl-tessera"), "doctor", "--kubeconfig="+cluster.Kubeconfig()).CombinedOutput()
	var exit *exec.ExitError
	if err == nil || !errors.As(err, &exit) {
		t.Errorf("doctor: %v, want a failing exit:\n%s", err, out)
	}
	line := ""
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, node+"/driver") {
			line = l
		}
	}
	for _, w := range []string{"FAIL", "node " + node + ": driverroot: " + want, "nvidiaDriverRoot"} {
		if !strings.Contains(line, w) {
			t.Errorf("doctor's %s/driver line %q lacks %q; output:\n%s", node, line, w, out)
		}
	}

	restore()
	deleteAgentPod(t, newestAgentPod(t, node))
	waitAgent(t, node, func(p *corev1.Pod) bool { return p.UID != old.UID }, "an agent that starts with the stand-in back")
}

// deleteAgentPod deletes p at once; its DaemonSet makes the next.
func deleteAgentPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	zero := int64(0)
	if err := client.CoreV1().Pods(localcluster.AgentNamespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

// newestAgentPod is the node's agent pod, Ready or not.
func newestAgentPod(t *testing.T, node string) *corev1.Pod {
	t.Helper()
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var out *corev1.Pod
	for i := range l.Items {
		p := &l.Items[i]
		if isAgent(p) && p.DeletionTimestamp == nil && (out == nil || p.CreationTimestamp.After(out.CreationTimestamp.Time)) {
			out = p
		}
	}
	if out == nil {
		t.Fatalf("node %s: no agent pod", node)
	}
	return out
}

// lastAgentMessage is the termination message of the node's agent pod
// other than old's, current or last, "" for none.
func lastAgentMessage(ctx context.Context, node string, old types.UID) string {
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err.Error()
	}
	for _, p := range l.Items {
		if !isAgent(&p) || p.UID == old {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if term != nil && term.Message != "" {
					return term.Message
				}
			}
		}
	}
	return ""
}
