package rack

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/sim/imexstandin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// domain is the GB200 trays' domain (the catalogue machine's clique).
const domain = "00000001-0000-0000-0000-000000000001.2"

// TestDomainPool: the trays are labelled with their domain and the node
// outside is not; one tray's agent holds the domain's lease and publishes
// its channels, selecting the domain's nodes.
func TestDomainPool(t *testing.T) {
	ctx := context.Background()
	// An agent may start before its kubelet registered the node: it
	// labels the node once it can (retryLabel).
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		for _, n := range append(slices.Clone(trays), outside) {
			node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got, want := node.Labels[names.NodeLabelFabricDomain], domain
			if n == outside {
				want = ""
			}
			if got != want {
				return false, fmt.Sprintf("node %s: label %s=%q, want %q", n, names.NodeLabelFabricDomain, got, want)
			}
		}
		return true, ""
	}); err != nil {
		t.Error(err)
	}
	var holder string
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		l, err := client.CoordinationV1().Leases(localcluster.IMEXNamespace).Get(ctx, channelpool.LeaseName(domain), metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, fmt.Sprintf("lease: %v", err)
		}
		holder = *l.Spec.HolderIdentity
		s := poolSlices(t)
		return len(s) == 1 && len(s[0].Spec.Devices) == channels, fmt.Sprintf("pool slices %d", len(s))
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(trays, holder) {
		t.Errorf("the lease is held by %q, not a tray of the domain", holder)
	}
	s := poolSlices(t)[0]
	if s.Spec.NodeName != nil || s.Spec.NodeSelector == nil || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Name != holder {
		t.Errorf("pool slice %s: node %v, selector %v, owners %v; want the domain's nodes, owned by %s", s.Name, s.Spec.NodeName, s.Spec.NodeSelector, s.OwnerReferences, holder)
	}
}

func poolSlices(t *testing.T) []resourceapi.ResourceSlice {
	t.Helper()
	l, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorDriver + "=" + names.DriverName})
	if err != nil {
		t.Fatal(err)
	}
	var out []resourceapi.ResourceSlice
	for _, s := range l.Items {
		if s.Spec.Pool.Name == channelpool.PoolName(domain) {
			out = append(out, s)
		}
	}
	return out
}

// job creates a job of workers pods in ns, each with a GPU of its own and
// the job's shared IMEX channel claim, and returns the pods' names.
func job(t *testing.T, ns, name string, workers int) []string {
	t.Helper()
	ctx := context.Background()
	claim := channelClaim(t, ns, name)
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nvidia.gpu.tessera.dev"},
		}}}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []string
	for i := range workers {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i)},
			Spec: corev1.PodSpec{
				ResourceClaims: []corev1.PodResourceClaim{
					{Name: "gpu", ResourceClaimTemplateName: &tmpl.Name},
					{Name: "imex", ResourceClaimName: &claim.Name},
				},
				Containers: []corev1.Container{{Name: "work", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}, {Name: "imex"}}}}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p.Name)
	}
	return pods
}

// channelClaim creates job name's shared claim of an IMEX channel,
// <name>-imex.
func channelClaim(t *testing.T, ns, name string) *resourceapi.ResourceClaim {
	t.Helper()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-imex"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "imex.gpu.tessera.dev"},
		}}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return claim
}

// channelOf checks that every pod runs on a tray and that its container
// got the same one channel node of the simulated driver's region, and
// returns that channel's path.
func channelOf(t *testing.T, ns string, pods []string) string {
	t.Helper()
	return channelOfContainer(t, ns, pods, "work")
}

// channelOfContainer is channelOf for the pods' container named container.
func channelOfContainer(t *testing.T, ns string, pods []string, container string) string {
	t.Helper()
	var channel string
	for _, name := range pods {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(trays, p.Spec.NodeName) {
			t.Errorf("pod %s on %s, which is no tray of the domain", name, p.Spec.NodeName)
			continue
		}
		c, err := record.Read(cluster.RecordDir(p.Spec.NodeName), ns, name, container)
		if err != nil {
			t.Fatal(err)
		}
		var got []record.DeviceNode
		for _, d := range c.Devices {
			if strings.HasPrefix(d.Path, imex.ChannelsDir+"/") {
				got = append(got, d)
			}
		}
		if len(got) != 1 || got[0].Type != "c" || got[0].Major != 237 || imex.ChannelPath(int(got[0].Minor)) != got[0].Path {
			t.Errorf("pod %s: channel nodes %+v, want one of major 237 whose minor is its number", name, got)
			continue
		}
		if channel == "" {
			channel = got[0].Path
		} else if got[0].Path != channel {
			t.Errorf("pod %s got %s, another worker of its job %s", name, got[0].Path, channel)
		}
	}
	return channel
}

// TestJobsGetTheirOwnChannels: two jobs of four workers each, placed at
// once: every worker lands on a tray of the domain, though the H100 node
// outside has free GPUs, and gets its job's channel, which is not the
// other job's. A third job finds no free channel and waits, whole; once
// the first ends, it gets the freed channel. When all end, no claim, spec
// or channel of theirs is left on the trays.
func TestJobsGetTheirOwnChannels(t *testing.T) {
	ctx := context.Background()
	ns := e2eutil.Namespace(t, client, "")
	a, b := job(t, ns, "job-a", 4), job(t, ns, "job-b", 4)
	if err := scenario.WaitRunning(ctx, client, ns, append(slices.Clone(a), b...), 180*time.Second); err != nil {
		t.Fatal(err)
	}
	chA, chB := channelOf(t, ns, a), channelOf(t, ns, b)
	if chA == chB {
		t.Fatalf("jobs a and b share channel %s", chA)
	}
	c := job(t, ns, "job-c", 2)
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		cl, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "job-c-imex", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if cl.Status.Allocation != nil {
			t.Fatalf("job c got a channel while both are taken: %+v", cl.Status.Allocation.Devices.Results)
		}
		p, err := client.CoreV1().Pods(ns).Get(ctx, c[0], metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "cannot allocate all claims") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("pod %s: %+v", c[0], p.Status.Conditions)
	}); err != nil {
		t.Fatal(err)
	}
	deletePods(t, ns, a)
	if err := client.ResourceV1().ResourceClaims(ns).Delete(ctx, "job-a-imex", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitRunning(ctx, client, ns, c, 180*time.Second); err != nil {
		t.Fatal(err)
	}
	if chC := channelOf(t, ns, c); chC != chA {
		t.Errorf("job c got %s, want the channel job a freed (%s)", chC, chA)
	}
	endJob(t, ns, "job-b", b)
	endJob(t, ns, "job-c", c)
	// The kubelets unprepare the claims once the pods are gone.
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		var left []string
		for _, tray := range trays {
			specs, _ := filepath.Glob(filepath.Join(cluster.CDIDir(tray), "k8s.gpu.tessera.dev-claim_*.json"))
			left = append(left, specs...)
		}
		return len(left) == 0, fmt.Sprintf("claim specs left: %v", left)
	}); err != nil {
		t.Error(err)
	}
}

// TestPrepareWaitsForIMEX: while a tray's IMEX daemon is failed, a job's
// workers do not start (each prepare of the channel fails, retried, with
// the daemon's status in the pod's events); cleared, they all run.
func TestPrepareWaitsForIMEX(t *testing.T) {
	ctx := context.Background()
	ns := e2eutil.Namespace(t, client, "")
	if err := imexstandin.InjectFault(cluster.IMEXConfig(trays[3]), "e2e: the tray's IMEX daemon is down"); err != nil {
		t.Fatal(err)
	}
	cleared := false
	t.Cleanup(func() {
		if !cleared {
			_ = imexstandin.ClearFault(cluster.IMEXConfig(trays[3]))
		}
	})
	pods := job(t, ns, "job-d", 4)
	if err := scenario.Poll(ctx, 120*time.Second, func() (bool, string) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "IMEX daemon is not ready") {
				return true, ""
			}
		}
		return false, "no event says the IMEX daemon is not ready"
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range pods {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			t.Errorf("pod %s runs on %s while the domain's IMEX is not ready", name, p.Spec.NodeName)
		}
	}
	if err := imexstandin.ClearFault(cluster.IMEXConfig(trays[3])); err != nil {
		t.Fatal(err)
	}
	cleared = true
	if err := scenario.WaitRunning(ctx, client, ns, pods, 180*time.Second); err != nil {
		t.Fatal(err)
	}
	channelOf(t, ns, pods)
	endJob(t, ns, "job-d", pods)
}

func deletePods(t *testing.T, ns string, pods []string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	for _, p := range pods {
		if err := client.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	if err := scenario.Poll(ctx, 120*time.Second, func() (bool, string) {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		left := 0
		for _, p := range l.Items {
			if slices.Contains(pods, p.Name) {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d pods left", left)
	}); err != nil {
		t.Fatal(err)
	}
}

// endJob deletes the job's pods and its channel claim, and waits until the
// claim is gone: its channel is free for the next job, whatever test.
func endJob(t *testing.T, ns, name string, pods []string) {
	t.Helper()
	ctx := context.Background()
	deletePods(t, ns, pods)
	if err := client.ResourceV1().ResourceClaims(ns).Delete(ctx, name+"-imex", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		_, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name+"-imex", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("claim %s-imex: %v", name, err)
	}); err != nil {
		t.Fatal(err)
	}
}
