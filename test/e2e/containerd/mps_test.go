package containerd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

// mpsDaemonLabel selects the agents' MPS daemon pods (internal/mps/daemonpod).
const mpsDaemonLabel = "app.kubernetes.io/name=tessera-mps-daemon"

// mpsSnapshot is what a test compares before and after an agent restart or
// upgrade: each MPS daemon a namespace's containers use (by the host
// directory of its pipes), the stand-in instance serving it, and the node's
// daemon pods.
type mpsSnapshot struct {
	node string
	// daemons maps a daemon's pipe directory to its stand-in instance.
	daemons map[string]string
	// clients maps a daemon's pipe directory to its connected sessions.
	clients map[string]int
	// pods maps the node's daemon pods to their UIDs.
	pods map[string]string
}

// mpsState snapshots the MPS daemons of the namespace's containers on node.
func mpsState(t *testing.T, ns, node string) *mpsSnapshot {
	t.Helper()
	s := &mpsSnapshot{node: node, daemons: map[string]string{}, clients: map[string]int{}, pods: daemonPods(t, node)}
	for _, src := range mpsPipes(t, ns) {
		pipe := daemonPipeDir(src)
		st, err := standin.ReadStatus(pipe)
		if err != nil {
			t.Fatalf("MPS daemon of %s: %v", src, err)
		}
		s.daemons[pipe], s.clients[pipe] = st.Instance, len(st.Clients)
	}
	if len(s.daemons) > 0 && len(s.pods) == 0 {
		t.Errorf("node %s: MPS daemons run, but no daemon pod: they live in the agent's container", node)
	}
	return s
}

// same checks that the daemons of s still run, as the same instances,
// answering and with at least their sessions, in the same pods.
func (s *mpsSnapshot) same(t *testing.T, when string) {
	t.Helper()
	for pipe, instance := range s.daemons {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := standin.Send(ctx, pipe, "get_server_list")
		cancel()
		if err != nil {
			t.Errorf("%s: MPS daemon of %s does not answer: %v", when, pipe, err)
			continue
		}
		st, err := standin.ReadStatus(pipe)
		if err != nil {
			t.Errorf("%s: %v", when, err)
			continue
		}
		if st.Instance != instance {
			t.Errorf("%s: MPS daemon of %s is a new one (instance %s, was %s): its clients died", when, pipe, st.Instance, instance)
		}
		if len(st.Clients) < s.clients[pipe] {
			t.Errorf("%s: MPS daemon of %s has %d client sessions, had %d", when, pipe, len(st.Clients), s.clients[pipe])
		}
	}
	now := daemonPods(t, s.node)
	for name, uid := range s.pods {
		if now[name] != uid {
			t.Errorf("%s: MPS daemon pod %s has UID %q, was %s", when, name, now[name], uid)
		}
	}
}

// daemonPipeDir is the pipe directory of the daemon a container's MPS
// mount comes from: the mount itself under legacy MPS, its namespace's
// <pipe>/<server>/<namespace> under MPS v3.
func daemonPipeDir(src string) string {
	for d := src; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, standin.StatusFile)); err == nil {
			return d
		}
	}
	return src
}

// daemonPods maps the node's running MPS daemon pods to their UIDs.
func daemonPods(t *testing.T, node string) map[string]string {
	t.Helper()
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: mpsDaemonLabel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = string(p.UID)
		}
	}
	return out
}

// daemonPodOf is the name of the node's daemon pod of the daemon whose
// directory is dir (internal/mps/daemonpod's annotation), "" when none runs.
func daemonPodOf(t *testing.T, node, dir string) string {
	t.Helper()
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: mpsDaemonLabel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if p.Annotations["gpu.tessera.dev/mps-dir"] == dir {
			return p.Name
		}
	}
	return ""
}
