package daemonpod

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

func TestAlive(t *testing.T) {
	waiting := func(reason string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}}
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	restarted := *running.DeepCopy()
	restarted.ContainerStatuses[0].RestartCount = 1
	terminated := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}
	for _, tc := range []struct {
		name   string
		status *corev1.PodStatus
		mutate func(*mps.Handle, *corev1.Pod)
		want   bool
	}{
		{name: "just created, no status", want: true},
		{name: "pending", status: &corev1.PodStatus{Phase: corev1.PodPending}, want: true},
		{name: "pulling", status: ptr(waiting("ContainerCreating")), want: true},
		{name: "running", status: &running, want: true},
		{name: "image pull error", status: ptr(waiting("ErrImagePull"))},
		{name: "image pull back-off", status: ptr(waiting("ImagePullBackOff"))},
		{name: "invalid image name", status: ptr(waiting("InvalidImageName"))},
		{name: "config error", status: ptr(waiting("CreateContainerConfigError"))},
		{name: "succeeded", status: &corev1.PodStatus{Phase: corev1.PodSucceeded}},
		{name: "failed", status: &corev1.PodStatus{Phase: corev1.PodFailed}},
		{name: "unknown", status: &corev1.PodStatus{Phase: corev1.PodUnknown}},
		{name: "container terminated", status: &terminated},
		{name: "container restarted", status: &restarted},
		{name: "being deleted", status: &running, mutate: func(_ *mps.Handle, p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }},
		{name: "another UID", status: &running, mutate: func(h *mps.Handle, _ *corev1.Pod) { h.PodUID = "someone-else" }},
		{name: "deleted", mutate: func(h *mps.Handle, _ *corev1.Pod) { h.Pod = testNS + "/tessera-mps-gone" }},
		{name: "no pod in handle", mutate: func(h *mps.Handle, _ *corev1.Pod) { *h = mps.Handle{PID: 42, StartTime: 7} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(t)
			l := newLauncher(t, testConfig(a))
			h, err := l.Launch(testCtx(t), launchOf("claim-1"))
			if err != nil {
				t.Fatal(err)
			}
			pod := getPod(t, a, h)
			if tc.status != nil {
				pod.Status = *tc.status
			}
			if tc.mutate != nil {
				tc.mutate(&h, pod)
			}
			setStatus(t, a, pod, pod.Status)
			if got := l.Alive(testCtx(t), h); got != tc.want {
				t.Errorf("Alive = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAliveAPIError: an API error is no evidence the daemon died, whose
// replacement would kill a live daemon's clients.
func TestAliveAPIError(t *testing.T) {
	a := newAPI(t)
	l := newLauncher(t, testConfig(a))
	h, err := l.Launch(testCtx(t), launchOf("claim-1"))
	if err != nil {
		t.Fatal(err)
	}
	a.PrependReactor("get", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	if !l.Alive(testCtx(t), h) {
		t.Error("Alive = false on an API error")
	}
}

func TestKill(t *testing.T) {
	a := newAPI(t)
	l := newLauncher(t, testConfig(a))
	ctx := testCtx(t)
	h, err := l.Launch(ctx, launchOf("claim-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Kill(ctx, h); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if l.Alive(ctx, h) {
		t.Error("alive after Kill")
	}
	if _, err := a.CoreV1().Pods(testNS).Get(ctx, PodName(testNode, "claim-1"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after Kill: %v", err)
	}
	if err := l.Kill(ctx, h); err != nil {
		t.Errorf("second Kill: %v", err)
	}

	// A pod recreated under the name is another daemon: Kill of the old
	// handle leaves it.
	h2, err := l.Launch(ctx, launchOf("claim-1"))
	if err != nil {
		t.Fatal(err)
	}
	if h2.Pod != h.Pod || h2.PodUID == h.PodUID {
		t.Fatalf("relaunch %+v after %+v: want the same name, another UID", h2, h)
	}
	if err := l.Kill(ctx, h); err != nil {
		t.Errorf("Kill of the old handle: %v", err)
	}
	if !l.Alive(ctx, h2) {
		t.Error("Kill of the old handle deleted the new pod")
	}
	var deletes []metav1.DeleteOptions
	for _, act := range a.Actions() {
		if d, ok := act.(clienttesting.DeleteActionImpl); ok {
			deletes = append(deletes, d.DeleteOptions)
		}
	}
	for _, d := range deletes {
		if d.Preconditions == nil || d.Preconditions.UID == nil || string(*d.Preconditions.UID) != h.PodUID || d.GracePeriodSeconds == nil || *d.GracePeriodSeconds != nodepod.DeleteGrace {
			t.Errorf("delete options %+v: want UID precondition %s and grace %d", d, h.PodUID, nodepod.DeleteGrace)
		}
	}
	if len(deletes) != 3 {
		t.Errorf("%d deletes, want 3", len(deletes))
	}
}

// TestKillWaits: a pod whose deletion the kubelet does not confirm is not
// gone; Kill says which pod on which node, after the timeout.
func TestKillWaits(t *testing.T) {
	a := newAPI(t)
	l := newLauncher(t, testConfig(a))
	ctx := testCtx(t)
	h, err := l.Launch(ctx, launchOf("claim-1"))
	if err != nil {
		t.Fatal(err)
	}
	a.stuck = true
	start := time.Now()
	err = l.Kill(ctx, h)
	if err == nil || !strings.Contains(err.Error(), h.Pod) || !strings.Contains(err.Error(), testNode) {
		t.Fatalf("Kill of a pod that stays: %v; want an error naming %s and %s", err, h.Pod, testNode)
	}
	if d := time.Since(start); d < l.c.Timeout || d > 10*l.c.Timeout {
		t.Errorf("Kill returned after %s, timeout %s", d, l.c.Timeout)
	}
	if l.Alive(ctx, h) {
		t.Error("a pod being deleted is alive")
	}
	if err := l.Kill(ctx, mps.Handle{PID: 1, StartTime: 2}); err == nil {
		t.Error("Kill of a process handle: no error")
	}
}

// TestLaunchReplaces: a pod already under the name (the daemon the Manager
// decided to replace) is deleted and the new one created in its place.
func TestLaunchReplaces(t *testing.T) {
	a := newAPI(t)
	l := newLauncher(t, testConfig(a))
	ctx := testCtx(t)
	old, err := l.Launch(ctx, launchOf("claim-1"))
	if err != nil {
		t.Fatal(err)
	}
	next := launchOf("claim-1")
	next.Env["CUDA_VISIBLE_DEVICES"] = "GPU-c"
	h, err := l.Launch(ctx, next)
	if err != nil {
		t.Fatalf("Launch over an existing pod: %v", err)
	}
	if h.Pod != old.Pod || h.PodUID == old.PodUID {
		t.Fatalf("handle %+v, old %+v", h, old)
	}
	if l.Alive(ctx, old) || !l.Alive(ctx, h) {
		t.Error("the old pod is alive or the new one is not")
	}
	if env := getPod(t, a, h).Spec.Containers[0].Env; env[2].Value != "GPU-c" {
		t.Errorf("new pod's env %+v", env)
	}

	// Where the old pod does not go, Launch fails naming pod and node.
	a.stuck = true
	_, err = l.Launch(ctx, launchOf("claim-1"))
	if err == nil || !strings.Contains(err.Error(), h.Pod) || !strings.Contains(err.Error(), testNode) {
		t.Errorf("Launch over a pod that stays: %v", err)
	}
}

func TestLaunchErrors(t *testing.T) {
	a := newAPI(t)
	c := testConfig(a)
	c.NodeName = "no-such-node"
	l := newLauncher(t, c)
	if _, err := l.Launch(testCtx(t), launchOf("claim-1")); err == nil || !strings.Contains(err.Error(), "node no-such-node") {
		t.Errorf("Launch without the Node: %v", err)
	}
	l = newLauncher(t, testConfig(a))
	bad := launchOf("claim-1")
	bad.Dir = "relative/dir"
	if _, err := l.Launch(testCtx(t), bad); err == nil {
		t.Error("Launch with a relative directory: no error")
	}
	a.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsGVR.GroupResource(), "x", errors.New("denied by policy"))
	})
	_, err := l.Launch(testCtx(t), launchOf("claim-1"))
	if err == nil || !strings.Contains(err.Error(), PodName(testNode, "claim-1")) || !strings.Contains(err.Error(), testNode) || !strings.Contains(err.Error(), "denied by policy") {
		t.Errorf("Launch refused: %v", err)
	}
}

func TestFind(t *testing.T) {
	a := newAPI(t)
	ctx := testCtx(t)
	l := newLauncher(t, testConfig(a))
	for _, id := range []string{"claim-b", "claim-a", "claim-dead"} {
		if _, err := l.Launch(ctx, launchOf(id)); err != nil {
			t.Fatal(err)
		}
	}
	dead := getPod(t, a, mps.Handle{Pod: testNS + "/" + PodName(testNode, "claim-dead")})
	setStatus(t, a, dead, corev1.PodStatus{Phase: corev1.PodFailed})

	// Another root of the same node.
	other := launchOf("claim-other")
	other.Dir = "/var/run/tessera/sim/n1/mps/claim-other"
	if _, err := l.Launch(ctx, other); err != nil {
		t.Fatal(err)
	}
	// Another node's daemon, and a pod without the label.
	c2 := testConfig(a)
	c2.NodeName = "gpu-node-2"
	if _, err := a.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-2", UID: "node-2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := newLauncher(t, c2).Launch(ctx, launchOf("claim-c")); err != nil {
		t.Fatal(err)
	}
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: testNS,
		Annotations: map[string]string{AnnotationID: "claim-x", AnnotationDir: testRoot + "/claim-x"}},
		Spec: corev1.PodSpec{NodeName: testNode}}
	if _, err := a.CoreV1().Pods(testNS).Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	found, err := l.Find(ctx, testRoot+"/")
	if err != nil {
		t.Fatal(err)
	}
	want := []mps.Found{
		{ID: "claim-b", Handle: mps.Handle{Pod: testNS + "/" + PodName(testNode, "claim-b"), PodUID: "pod-uid-1"}, Devices: []string{"GPU-a", "GPU-b"}},
		{ID: "claim-a", Handle: mps.Handle{Pod: testNS + "/" + PodName(testNode, "claim-a"), PodUID: "pod-uid-2"}, Devices: []string{"GPU-a", "GPU-b"}},
	}
	if !reflect.DeepEqual(found, want) {
		t.Errorf("Find =\n%+v\nwant (oldest first)\n%+v", found, want)
	}
	// The request asks the server to filter too.
	for _, act := range a.Actions() {
		if lst, ok := act.(clienttesting.ListActionImpl); ok {
			r := lst.GetListRestrictions()
			if r.Labels.String() != LabelName+"="+AppName || r.Fields.String() != "spec.nodeName="+testNode {
				t.Errorf("list restrictions %v %v", r.Labels, r.Fields)
			}
		}
	}
	if found, err := l.Find(ctx, "/var/run/tessera/sim/n1/mps"); err != nil || len(found) != 1 || found[0].ID != "claim-other" {
		t.Errorf("Find of the other root: %+v, %v", found, err)
	}
	if found, err := l.Find(ctx, "/var/run/tessera/mp"); err != nil || len(found) != 0 {
		t.Errorf("Find of a prefix that is no parent: %+v, %v", found, err)
	}
	a.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := l.Find(context.Background(), testRoot); err == nil || !strings.Contains(err.Error(), testNode) {
		t.Errorf("Find on a failing API: %v", err)
	}
}

func TestUnder(t *testing.T) {
	for _, tc := range []struct {
		root, dir string
		want      bool
	}{
		{"/r", "/r/a", true},
		{"/r", "/r/a/b", true},
		{"/r", "/r", false},
		{"/r", "/ra", false},
		{"/r", "/r/../x", false},
		{"/r", "", false},
		{"/r", "r/a", false},
	} {
		if got := under(tc.root, tc.dir); got != tc.want {
			t.Errorf("under(%q, %q) = %v", tc.root, tc.dir, got)
		}
	}
}
