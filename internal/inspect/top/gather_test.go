package top

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/internal/inspect/agents"
	"github.com/tessera-gpu/tessera/internal/names"
)

// proxied is the API server's pod proxy answering with an agent's body.
type proxied struct{ body []byte }

func (p proxied) DoRaw(context.Context) ([]byte, error) { return p.body, nil }
func (p proxied) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(p.body))), nil
}

func agentPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tessera-" + node, Namespace: "tessera-system",
			Labels: map[string]string{"app.kubernetes.io/name": "tessera", "app.kubernetes.io/component": "kubelet-plugin"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "agent",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: agents.DefaultMetricsPort}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func shareClaim(ns, name, node, device, share string, memory string) *resourceapi.ResourceClaim {
	id := types.UID(share)
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: names.DriverName, Pool: node, Device: device,
				ShareID: &id, ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}},
		}}},
	}
}

// Without --metrics-url every agent pod is asked through the API server's
// pod proxy, and a share's allowed memory is its claim's consumed capacity.
func TestGatherThroughPodProxy(t *testing.T) {
	urls := fleet(t)
	c := fake.NewClientset(agentPod("gpu-h100"), agentPod("gpu-l4"),
		shareClaim("team-c", "a", "gpu-l4", "gpu-0", "s1", "8Gi"), shareClaim("team-d", "b", "gpu-l4", "gpu-0", "s2", "4Gi"))
	var asked []string
	c.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		p := a.(k8stesting.ProxyGetAction)
		asked = append(asked, p.GetName()+":"+p.GetPort()+p.GetPath())
		resp, err := http.Get(urls[strings.TrimPrefix(p.GetName(), "tessera-")])
		if err != nil {
			return true, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return true, proxied{body}, err
	})
	res, err := Gather(context.Background(), c, Options{})
	if err != nil || len(res.Warnings) > 0 {
		t.Fatalf("Gather: %v, warnings %v", err, res.Warnings)
	}
	if len(asked) != 2 || !strings.HasSuffix(asked[0], ":9478/metrics") {
		t.Errorf("proxied %v, want both agents' :9478/metrics", asked)
	}
	top := Build(res.Series, res.Shares)
	allowed := map[string]string{}
	for _, p := range top.Pods {
		allowed[p.Pod] = memory(p.MemoryUsed, p.MemoryAllowed)
	}
	want := map[string]string{"train-0": "30Gi/80Gi", "infer": "4Gi/40Gi", "chat": "12Gi/8Gi", "embed": "12Gi/4Gi"}
	for pod, w := range want {
		if allowed[pod] != w {
			t.Errorf("pod %s: memory %q, want %q (all: %v)", pod, allowed[pod], w, allowed)
		}
	}
}

// A node named that has no agent pod is a warning saying what to pass.
func TestGatherNoAgentPod(t *testing.T) {
	urls := fleet(t)
	c := fake.NewClientset()
	res, err := Gather(context.Background(), c, Options{Nodes: []string{"gpu-h100", "gpu-x"}, MetricsURLs: map[string]string{"gpu-h100": urls["gpu-h100"]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "gpu-x") || !strings.Contains(res.Warnings[0], "--metrics-url") {
		t.Errorf("warnings %v", res.Warnings)
	}
	if _, err := Gather(context.Background(), c, Options{}); err == nil || !strings.Contains(err.Error(), "--metrics-url NODE=URL") {
		t.Errorf("no agents at all: %v", err)
	}
}
