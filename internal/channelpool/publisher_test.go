package channelpool

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func publisher(t *testing.T, client kubernetes.Interface, node string) *Publisher {
	t.Helper()
	p, err := NewPublisher(Config{Client: client, Namespace: "tessera-system", Node: node, Channels: 3,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// holder waits until domain's lease is held by node and the pool is
// published with node as its slices' owner.
func holder(t *testing.T, ctx context.Context, client kubernetes.Interface, domain, node string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases("tessera-system").Get(ctx, LeaseName(domain), metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != node {
			return false, nil
		}
		slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			if s.Spec.Pool.Name == PoolName(domain) && len(s.Spec.Devices) == 3 && len(s.OwnerReferences) == 1 && s.OwnerReferences[0].Name == node {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("domain %s: lease and pool not %s's: %v", domain, node, err)
	}
}

// TestPublisherTakesTurns: of two agents of a domain one publishes its
// pool; when it stops (handing the lease back) the other takes over.
func TestPublisherTakesTurns(t *testing.T) {
	ctx := context.Background()
	var nodes []agentOf
	client := fake.NewClientset()
	for _, n := range []string{"tray-1", "tray-2"} {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, UID: types.UID("uid-" + n)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, agentOf{n, publisher(t, client, n)})
	}
	if err := nodes[0].p.Follow(ctx, domainA); err != nil {
		t.Fatal(err)
	}
	holder(t, ctx, client, domainA, "tray-1")
	if err := nodes[1].p.Follow(ctx, domainA); err != nil {
		t.Fatal(err)
	}
	nodes[0].p.Stop()
	holder(t, ctx, client, domainA, "tray-2")
	// Its node leaving the domain: it stops running for it.
	if err := nodes[1].p.Follow(ctx, ""); err != nil {
		t.Fatal(err)
	}
	l, err := client.CoordinationV1().Leases("tessera-system").Get(ctx, LeaseName(domainA), metav1.GetOptions{})
	if err != nil || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
		t.Errorf("lease after its holder left the domain: %v, %v; want handed back", l.Spec.HolderIdentity, err)
	}
	if err := nodes[1].p.Follow(ctx, "Bad.Domain"); err == nil {
		t.Error("a domain that makes no pool name was followed")
	}
}

type agentOf struct {
	node string
	p    *Publisher
}

// TestNewPublisher refuses what cannot run.
func TestNewPublisher(t *testing.T) {
	for _, cfg := range []Config{
		{Namespace: "ns", Node: "n", Channels: 1},
		{Client: fake.NewClientset(), Node: "n", Channels: 1},
		{Client: fake.NewClientset(), Namespace: "ns", Node: "n", Channels: 0},
	} {
		if _, err := NewPublisher(cfg); err == nil {
			t.Errorf("%s: accepted", fmt.Sprint(cfg.Namespace, cfg.Channels))
		}
	}
}
