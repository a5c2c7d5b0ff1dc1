package doctor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/internal/inspect/agents"
)

// rawResponse is what the API server's pod proxy answers.
type rawResponse struct {
	body []byte
	err  error
}

func (r rawResponse) DoRaw(context.Context) ([]byte, error) { return r.body, r.err }
func (r rawResponse) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(r.body))), r.err
}

var _ restclient.ResponseWrapper = rawResponse{}

func agentPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "tessera-" + node, Namespace: "tessera-system",
			Labels: map[string]string{"app.kubernetes.io/name": "tessera", "app.kubernetes.io/component": "kubelet-plugin", "app.kubernetes.io/instance": "tessera"},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "tessera-kubelet-plugin",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: agents.DefaultMetricsPort}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
}

// The cluster of the healthy input, read back through a fake clientset:
// every check passes, /readyz is asked through the pod proxy, and doctor
// only reads.
func TestGatherDoctorInputHappyPath(t *testing.T) {
	want := healthyInput(t)
	var objs []runtime.Object
	for i := range want.Slices {
		s := want.Slices[i].DeepCopy()
		s.Name = s.GenerateName + "x"
		objs = append(objs, s)
	}
	for i := range want.Claims {
		objs = append(objs, want.Claims[i].DeepCopy())
	}
	for i := range want.Classes {
		objs = append(objs, want.Classes[i].DeepCopy())
	}
	for i := range want.NodeObjects {
		objs = append(objs, want.NodeObjects[i].DeepCopy())
		objs = append(objs, agentPod(want.NodeObjects[i].Name))
	}
	// The webhook's pod is not an agent.
	wh := agentPod("dgx-h100-0")
	wh.Name, wh.Labels["app.kubernetes.io/component"] = "tessera-webhook", "webhook"
	objs = append(objs, wh)
	// An event an hour and a half old, and one of another reason: ignored.
	old := prepEvent("default", "old", "dgx-h100-dyn", doctorNow.Add(-90*time.Minute), 1, "old")
	other := prepEvent("default", "x", "dgx-h100-dyn", doctorNow, 1, "mount")
	other.Name, other.Reason = "x.mount", "FailedMount"
	objs = append(objs, &old, &other)

	c := fake.NewClientset(objs...)
	var proxied []string
	c.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		p := a.(k8stesting.ProxyGetAction)
		proxied = append(proxied, p.GetNamespace()+"/"+p.GetName()+":"+p.GetPort()+p.GetPath())
		return true, rawResponse{body: []byte("ok\n")}, nil
	})
	in, err := Gather(context.Background(), c, Options{Now: doctorNow})
	if err != nil {
		t.Fatal(err)
	}
	fs := Run(in)
	for _, f := range fs {
		if f.Status != StatusPass {
			t.Errorf("%s %s: %s", f.Status, f.Name(), f.Detail)
		}
	}
	if len(fs) != 20 { // 19 and the fleet's driver check
		t.Errorf("%d findings, want 20", len(fs))
	}
	slices.Sort(proxied)
	wantProxied := []string{
		"tessera-system/tessera-dgx-h100-0:9478/readyz",
		"tessera-system/tessera-dgx-h100-dyn:9478/readyz",
		"tessera-system/tessera-dgx-h100-mig-0:9478/readyz",
	}
	if !slices.Equal(proxied, wantProxied) {
		t.Errorf("proxied %v, want %v", proxied, wantProxied)
	}
	if r := in.Readiness["dgx-h100-0"]; r.State != ReadyOK || !strings.Contains(r.Via, "pod tessera-system/tessera-dgx-h100-0 port 9478") {
		t.Errorf("readiness %+v", r)
	}
	if len(in.Events) != 0 {
		t.Errorf("events %v, want none recent of reason %s", in.Events, ReasonFailedPrepare)
	}
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "list", "get":
		default:
			t.Errorf("action %s %s/%s: doctor only reads", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	var b strings.Builder
	if err := Print(&b, fs); err != nil {
		t.Error(err)
	}
	t.Logf("\n%s", b.String())
}

// Named nodes, a --metrics-url answering 503, a node whose agent pod the
// proxy cannot reach, a node without an agent pod, events placed through
// their pod, unreadable DeviceClasses.
func TestGatherDoctorInputBroken(t *testing.T) {
	in0 := healthyInput(t)
	var objs []runtime.Object
	for i := range in0.Slices {
		s := in0.Slices[i].DeepCopy()
		s.Name = s.GenerateName + "x"
		objs = append(objs, s)
	}
	for i := range in0.NodeObjects {
		objs = append(objs, in0.NodeObjects[i].DeepCopy())
	}
	crash := agentPod("dgx-h100-dyn")
	crash.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tessera-kubelet-plugin", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "dgx-h100-dyn"}}
	ev := prepEvent("default", "train-0", "", doctorNow.Add(-time.Minute), 2, "prepare failed")
	objs = append(objs, crash, pod, &ev)
	c := fake.NewClientset(objs...)
	c.PrependReactor("list", "deviceclasses", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, "", errors.New("no"))
	})
	c.PrependProxyReactor("pods", func(k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		return true, rawResponse{err: apierrors.NewServiceUnavailable("error trying to reach service: dial tcp 10.0.0.7:9478: connect: connection refused")}, nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: not registered with the kubelet yet\n")
	}))
	defer srv.Close()

	in, err := Gather(context.Background(), c, Options{
		Nodes:       []string{"dgx-h100-0", "dgx-h100-dyn", "dgx-h100-mig-0", "ghost"},
		MetricsURLs: map[string]string{"dgx-h100-0": srv.URL + "/metrics"},
		Now:         doctorNow,
	})
	if err != nil {
		t.Fatal(err)
	}
	fs := Run(in)
	var b strings.Builder
	err = Print(&b, fs)
	out := b.String()
	t.Logf("\n%s", out)
	var failed *ChecksFailedError
	if !errors.As(err, &failed) {
		t.Errorf("err = %v, want a ChecksFailedError", err)
	}
	for _, want := range []string{
		"WARN  deviceclasses ",
		"could not list DeviceClasses",
		"FAIL  dgx-h100-0/readyz ",
		"not ready (" + srv.URL + "/readyz): HTTP 503: not ready: not registered with the kubelet yet",
		"FAIL  dgx-h100-dyn/readyz ",
		"connection refused (container tessera-kubelet-plugin CrashLoopBackOff)",
		"WARN  dgx-h100-mig-0/readyz ",
		"no agent pod found (the agent may run as a host process); readiness not checked",
		"WARN  dgx-h100-dyn/prepare ",
		"pod default/train-0: FailedPrepareDynamicResources x2 in the last hour, latest: prepare failed",
		"FAIL  ghost/node ",
		"node ghost does not exist",
		"FAIL  ghost/slices ",
		"no ResourceSlices: the agent is not running or not registered on ghost",
		"\n23 checks: 16 passed, 3 warnings, 4 failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
