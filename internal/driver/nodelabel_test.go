package driver

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
)

// TestNodeLabelFollowsTheFabricDomain: the node carries its GPUs' one
// fabric domain as a label, patched only when it changes, removed when the
// GPUs have none or name several, and a failed patch is tried again.
func TestNodeLabelFollowsTheFabricDomain(t *testing.T) {
	const node = "tray-1"
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"keep": "me"}}})
	fail := false
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, errors.New("API server unavailable")
		}
		return false, nil, nil
	})
	l := &nodeLabeler{client: client, node: node}
	inv := func(domains ...string) *inventory.Node {
		n := &inventory.Node{}
		for _, d := range domains {
			n.GPUs = append(n.GPUs, inventory.GPU{FabricDomain: d})
		}
		return n
	}
	const dom = "00000001-0000-0000-0000-000000000001.2"
	for _, step := range []struct {
		name    string
		inv     *inventory.Node
		fail    bool
		want    string // the label's value, "" for none
		patches int    // patches this step sends
		wantErr bool
	}{
		{"a tray of one domain", inv(dom, dom, dom, dom), false, dom, 1, false},
		{"the same again: no write", inv(dom, dom, dom, dom), false, dom, 0, false},
		{"a GPU without one beside them", inv(dom, "", dom), false, dom, 0, false},
		{"two domains: no label", inv(dom, "00000001-0000-0000-0000-000000000001.3"), false, "", 1, false},
		{"a failed patch", inv(dom), true, "", 1, true},
		{"tried again", inv(dom), false, dom, 1, false},
		{"no domain any more", inv("", ""), false, "", 1, false},
	} {
		fail = step.fail
		before := len(patches(client))
		err := l.sync(context.Background(), step.inv)
		if (err != nil) != step.wantErr {
			t.Fatalf("%s: sync %v, want error %v", step.name, err, step.wantErr)
		}
		// A failed patch leaves the label pending, for retryLabel.
		if l.pending() != step.wantErr {
			t.Errorf("%s: pending %v, want %v", step.name, l.pending(), step.wantErr)
		}
		if got := len(patches(client)) - before; got != step.patches {
			t.Errorf("%s: %d patches, want %d", step.name, got, step.patches)
		}
		n, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Labels[names.NodeLabelFabricDomain]; got != step.want {
			t.Errorf("%s: label %q, want %q", step.name, got, step.want)
		}
		if n.Labels["keep"] != "me" {
			t.Errorf("%s: the node's other labels changed: %v", step.name, n.Labels)
		}
	}
}

func patches(c *fake.Clientset) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" {
			out = append(out, a)
		}
	}
	return out
}

// TestNodeIMEXAddressBesideTheLabel: with --imex-address the node carries
// the address as an annotation while it is in a domain, in the label's
// one patch, and loses it with the label; other annotations stay.
func TestNodeIMEXAddressBesideTheLabel(t *testing.T) {
	const node, dom = "tray-2", "00000001-0000-0000-0000-000000000001.2"
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{"keep": "me"}}})
	l := &nodeLabeler{client: client, node: node, imexAddress: "127.0.0.2"}
	for _, step := range []struct {
		name         string
		domain       string
		label, annot string
		patches      int
	}{
		{"in a domain", dom, dom, "127.0.0.2", 1},
		{"again: no write", dom, dom, "127.0.0.2", 0},
		{"out of it", "", "", "", 1},
	} {
		before := len(patches(client))
		if err := l.sync(context.Background(), &inventory.Node{GPUs: []inventory.GPU{{FabricDomain: step.domain}}}); err != nil {
			t.Fatal(err)
		}
		n, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[names.NodeLabelFabricDomain] != step.label || n.Annotations[names.NodeAnnotationIMEXAddress] != step.annot || n.Annotations["keep"] != "me" {
			t.Errorf("%s: labels %v, annotations %v", step.name, n.Labels, n.Annotations)
		}
		if got := len(patches(client)) - before; got != step.patches {
			t.Errorf("%s: %d patches, want %d", step.name, got, step.patches)
		}
	}
}
