package daemonpod

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

const domain = "00000001-0000-0000-0000-000000000001.2"

// tray is a node of domain at ip, or at the address annotation when set.
func tray(name, ip, annotation string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "name", Labels: map[string]string{names.NodeLabelFabricDomain: domain}}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	if annotation != "" {
		n.Annotations = map[string]string{names.NodeAnnotationIMEXAddress: annotation}
	}
	return n
}

func newDaemon(t *testing.T, objs ...runtime.Object) (*Daemon, *fake.Clientset, string) {
	t.Helper()
	client := fake.NewClientset(objs...)
	dir := filepath.Join(t.TempDir(), "imex")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{
		Client: client, Dir: dir, Program: []string{"/usr/bin/nvidia-imex"},
		Settings: nodepod.Settings{Namespace: "tessera", NodeName: "tray-b", Image: "tessera:1", ServiceAccount: "tessera-daemons"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, client, dir
}

// TestEnsureStartsTheDomainsDaemon: Ensure writes the nodes file of the
// domain's labelled nodes (sorted by name, each at its annotation or
// InternalIP, other domains' nodes left out) and a config without quorum
// on the directory's socket, then creates the one pod of the node; a
// second Ensure adopts the live pod; a dead pod, or one of another
// domain, is replaced; Stop deletes it.
func TestEnsureStartsTheDomainsDaemon(t *testing.T) {
	ctx := context.Background()
	other := tray("tray-z", "10.0.9.1", "")
	other.Labels[names.NodeLabelFabricDomain] = "00000001-0000-0000-0000-000000000001.3"
	d, client, dir := newDaemon(t, tray("tray-c", "10.0.0.3", ""), tray("tray-a", "10.0.0.1", ""), tray("tray-b", "10.0.0.2", "127.0.0.2"), other,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h100"}})
	if err := d.Ensure(ctx, domain); err != nil {
		t.Fatal(err)
	}
	nodes, err := os.ReadFile(filepath.Join(dir, NodesName))
	if err != nil || string(nodes) != "10.0.0.1\n127.0.0.2\n10.0.0.3\n" {
		t.Fatalf("nodes file %q, %v: want tray-a, tray-b (its annotation), tray-c", nodes, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := imex.ParseConfig(raw)
	if err != nil || cfg.WaitForQuorum != imex.QuorumNone || cfg.CmdUnixSocket != filepath.Join(dir, SocketName) || cfg.NodesFile != filepath.Join(dir, NodesName) || cfg.ServerPort != imex.DefaultServerPort {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	pod := getPod(t, client)
	c := pod.Spec.Containers[0]
	if pod.Spec.NodeName != "tray-b" || !pod.Spec.HostNetwork || *pod.Spec.AutomountServiceAccountToken || pod.Annotations[AnnotationDomain] != domain ||
		strings.Join(c.Command, " ") != "/usr/bin/nvidia-imex -c "+filepath.Join(dir, ConfigName) || c.VolumeMounts[0].MountPath != dir {
		t.Fatalf("pod %+v", pod)
	}

	// Adopted while it runs.
	setRunning(t, client, pod)
	if err := d.Ensure(ctx, domain); err != nil {
		t.Fatal(err)
	}
	if n := creates(client); n != 1 {
		t.Fatalf("a live daemon of the domain was replaced: %d pods created", n)
	}
	// Dead: replaced.
	pod = getPod(t, client)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	if _, err := client.CoreV1().Pods("tessera").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Ensure(ctx, domain); err != nil {
		t.Fatal(err)
	}
	if fresh := getPod(t, client); len(fresh.Status.ContainerStatuses) != 0 || creates(client) != 2 {
		t.Fatal("a dead daemon's pod was kept")
	}
	// Another domain's: replaced.
	if err := d.Ensure(ctx, "00000001-0000-0000-0000-000000000001.3"); err != nil {
		t.Fatal(err)
	}
	if p := getPod(t, client); p.Annotations[AnnotationDomain] != "00000001-0000-0000-0000-000000000001.3" {
		t.Fatalf("domain %q", p.Annotations[AnnotationDomain])
	}
	if nodes, _ := os.ReadFile(filepath.Join(dir, NodesName)); string(nodes) != "10.0.9.1\n" {
		t.Fatalf("nodes file of the other domain %q", nodes)
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := client.CoreV1().Pods("tessera").List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Fatalf("pods after Stop: %d", len(list.Items))
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatalf("Stop with none running: %v", err)
	}
}

// TestEnsureRefuses: a labelled node without an address, or a domain
// whose nodes the agent cannot list, starts nothing and names why.
func TestEnsureRefuses(t *testing.T) {
	ctx := context.Background()
	d, client, _ := newDaemon(t, tray("tray-a", "", ""), tray("tray-b", "10.0.0.2", ""))
	err := d.Ensure(ctx, domain)
	if err == nil || !strings.Contains(err.Error(), "node tray-a of multi-node NVLink domain") || !strings.Contains(err.Error(), "no InternalIP") {
		t.Fatalf("a node without an address: %v", err)
	}
	if list, _ := client.CoreV1().Pods("tessera").List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Fatal("a pod was created with an incomplete nodes file")
	}
	if _, err := New(Config{Client: client, Dir: "relative", Program: []string{"p"}, Settings: nodepod.Settings{Namespace: "n", NodeName: "x", Image: "i", ServiceAccount: "s"}}); err == nil {
		t.Error("a relative directory was accepted")
	}
	if _, err := New(Config{Client: client, Dir: "/d"}); err == nil || !strings.Contains(err.Error(), "no namespace, node name, image, service account") {
		t.Errorf("missing fields: %v", err)
	}
}

func getPod(t *testing.T, client *fake.Clientset) *corev1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods("tessera").Get(context.Background(), PodName("tray-b"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func setRunning(t *testing.T, client *fake.Clientset, pod *corev1.Pod) {
	t.Helper()
	pod.Status.Phase = corev1.PodRunning
	if _, err := client.CoreV1().Pods("tessera").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// creates counts the pods created through client.
func creates(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}
