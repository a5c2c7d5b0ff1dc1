package containerd

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestShareNamespacesIsolated: two tenants, in two namespaces, each hold a
// 7Gi share of the same L4 on the R615 node. Each share runs in an MPS v3
// namespace of its own in the GPU's one daemon, with its limit held there;
// each tenant's container sees only its namespace's socket (never the
// daemon's control pipe, nor the other tenant's namespace), holds a client
// session through it, and cannot quit or reconfigure the daemon through
// it. When the first tenant goes, its namespace goes and the second keeps
// its session; when the second goes, so does the daemon.
func TestShareNamespacesIsolated(t *testing.T) {
	node := nodes[2].Name
	const pci = "0000:83:00.0" // GPU 2 of l4-4-r615: both shares on it
	type tenant struct {
		ns, pod, claim, shareID, mount string
		log                            seen
	}
	tenants := []*tenant{{ns: namespace(t, "a")}, {ns: namespace(t, "b")}}
	// Whatever happens, the next test finds the GPU free.
	t.Cleanup(func() {
		for _, tn := range tenants {
			drain(t, tn.ns)
		}
	})
	for _, tn := range tenants {
		tn.pod = "tenant"
		sharePod(t, tn.ns, tn.pod, node, pci, "7Gi")
	}
	for _, tn := range tenants {
		if err := scenario.WaitRunning(context.Background(), client, tn.ns, []string{tn.pod}, 120*time.Second); err != nil {
			t.Fatal(err)
		}
		p, err := client.CoreV1().Pods(tn.ns).Get(context.Background(), tn.pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkContainer(t, tn.ns, p, p.Spec.Containers[0])
		tn.claim = claimUID(t, tn.ns, p, "gpu")
		tn.mount = claimWants(t, node, tn.claim).sources[mps.ContainerPipeDir]
		tn.shareID = shareIDOf(t, tn.ns, p)
		tn.log = waitMPSSession(t, tn.ns, tn.pod)
	}
	a, b := tenants[0], tenants[1]
	pipe := daemonPipeDir(a.mount)
	if daemonPipeDir(b.mount) != pipe {
		t.Fatalf("the two shares of GPU %s run under different daemons: %s, %s", pci, pipe, daemonPipeDir(b.mount))
	}
	for _, tn := range tenants {
		want := filepath.Join(pipe, "tessera", tn.shareID)
		if tn.mount != want {
			t.Errorf("%s: container mounts %s, want its namespace's directory %s", tn.ns, tn.mount, want)
		}
		// Its view: its namespace's socket (and the reply FIFOs its own
		// client makes beside it), nothing of the daemon or the other.
		for _, f := range tn.log.mpsFiles {
			if f != standin.ControlFIFO && !strings.HasPrefix(f, ".reply-") {
				t.Errorf("%s: the container sees %s under its MPS pipe directory: only its namespace's socket belongs there", tn.ns, f)
			}
		}
		if !slices.Contains(tn.log.mpsFiles, standin.ControlFIFO) {
			t.Errorf("%s: the container does not see its namespace's socket (sees %v)", tn.ns, tn.log.mpsFiles)
		}
		// Held by the kernel (memlimit_test.go), its compute in its namespace.
		shareCondition(t, tn.ns, "KernelMemoryLimit")
	}
	st, err := standin.ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		l, ok := st.Servers["tessera"].Namespaces[tn.shareID]
		if !ok {
			t.Fatalf("daemon of %s has no namespace %s: %+v", pipe, tn.shareID, st.Servers)
		}
		if got := l.String(); !strings.Contains(got, "7168M") {
			t.Errorf("namespace %s: limits %s, want the share's 7168M pinned", tn.shareID, got)
		}
	}
	// What a tenant could send through its socket is refused: the admin
	// commands work only on the daemon's control pipe, out of its view.
	for _, cmd := range []string{"quit", "namespace delete --server=tessera --name=" + b.shareID, "namespace create --server=tessera --name=evil"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := standin.Send(ctx, a.mount, cmd)
		cancel()
		if err == nil {
			t.Errorf("tenant %s sent %q through its namespace's socket, and the daemon took it", a.ns, cmd)
		}
	}
	instance := st.Instance
	zero := int64(0)
	if err := client.CoreV1().Pods(a.ns).Delete(context.Background(), a.pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitUnprepared(t, map[string]string{a.claim: node})
	st, err = standin.ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Servers["tessera"].Namespaces[a.shareID]; ok {
		t.Errorf("namespace %s of the deleted share is still there", a.shareID)
	}
	if st.Instance != instance || !hasClientIn(st, b.shareID) {
		t.Errorf("after the first tenant left: daemon instance %s (was %s), clients %+v: the second tenant's session is gone", st.Instance, instance, st.Clients)
	}
	if err := client.CoreV1().Pods(b.ns).Delete(context.Background(), b.pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitUnprepared(t, map[string]string{b.claim: node})
	if err := scenario.Poll(context.Background(), 30*time.Second, func() (bool, string) {
		if name := daemonPodOf(t, node, filepath.Dir(pipe)); name != "" {
			return false, "daemon pod " + name + " still runs"
		}
		return true, ""
	}); err != nil {
		t.Errorf("after the last share of GPU %s left: %v", pci, err)
	}
}

// hasClientIn reports whether a session of namespace ns is connected.
func hasClientIn(st *standin.Status, ns string) bool {
	return slices.ContainsFunc(st.Clients, func(c standin.ClientStatus) bool { return c.Namespace == ns })
}

// sharePod creates, in ns, a probe pod with a claim of memory of the GPU at
// pci on node.
func sharePod(t *testing.T, ns, name, node, pci, memory string) {
	t.Helper()
	shareTemplate(t, ns, name, memory, fmt.Sprintf(`device.attributes["resource.kubernetes.io"].pciBusID == %q`, pci))
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), probePod(name, node, name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// shareIDOf is the ShareID of the pod's one allocated device.
func shareIDOf(t *testing.T, ns string, p *corev1.Pod) string {
	t.Helper()
	name := *p.Status.ResourceClaimStatuses[0].ResourceClaimName
	c, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].ShareID == nil {
		t.Fatalf("claim %s/%s: no one share allocated: %+v", ns, name, c.Status.Allocation)
	}
	return string(*c.Status.Allocation.Devices.Results[0].ShareID)
}

// shareCondition checks the ShareEnforced reason on the namespace's claim.
func shareCondition(t *testing.T, ns, reason string) {
	t.Helper()
	l, err := client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Items {
		found := false
		for _, ds := range c.Status.Devices {
			for _, cond := range ds.Conditions {
				if cond.Type == "ShareEnforced" {
					found = true
					if cond.Reason != reason {
						t.Errorf("claim %s/%s: ShareEnforced reason %s (%s), want %s", ns, c.Name, cond.Reason, cond.Message, reason)
					}
				}
			}
		}
		if !found {
			t.Errorf("claim %s/%s: no ShareEnforced condition", ns, c.Name)
		}
	}
}

// waitMPSSession waits until the pod's probe says its MPS client session
// is connected, and returns its log.
func waitMPSSession(t *testing.T, ns, pod string) seen {
	t.Helper()
	ctx := context.Background()
	var s seen
	err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		b, err := client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		s = parseProbe(string(b))
		return slices.Contains(s.mps, "mps connected"), fmt.Sprintf("no MPS session yet: %q", s.mps)
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v", ns, pod, err)
	}
	return s
}
