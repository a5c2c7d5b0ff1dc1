package containerd

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

func namespace(t *testing.T, suffix string) string {
	t.Helper()
	return e2eutil.Namespace(t, client, suffix)
}

func checkpointClaims(t *testing.T, node string) map[string]checkpoint.State {
	t.Helper()
	return e2eutil.CheckpointClaims(t, cluster, node)
}

func specExists(node, uid string) bool { return e2eutil.SpecExists(cluster, node, uid) }

// killPid SIGKILLs pid and waits until it is gone.
func killPid(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	for range 200 {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("pid %d survived SIGKILL", pid)
}

// drain deletes every pod of ns and waits until the kubelet unprepared
// their claims: the next test on the node finds its devices free.
func drain(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	l, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]string{}
	for _, c := range l.Items {
		if a := c.Status.Allocation; a != nil && len(a.Devices.Results) > 0 {
			claims[string(c.UID)] = a.Devices.Results[0].Pool
		}
	}
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnprepared(t, claims)
}

// probePod is a probe pod on node whose one container uses a claim of
// template tmpl, named "gpu".
func probePod(name, node, tmpl string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
			Containers: []corev1.Container{{
				Name: "probe", Image: localcluster.ProbeImage, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
}

// shareTemplate creates, in ns, a claim template of memory of an NVIDIA
// GPU that the CEL expression selects.
func shareTemplate(t *testing.T, ns, name, memory, expression string) {
	t.Helper()
	claimTemplate(t, ns, name, "nvidia.gpu.tessera.dev", expression, memory)
}

// claimTemplate creates, in ns, a claim template of one device of class
// that the CEL expression selects; with memory, of that much of it (a
// capacity share).
func claimTemplate(t *testing.T, ns, name, class, expression, memory string) {
	t.Helper()
	req := &resourceapi.ExactDeviceRequest{
		DeviceClassName: class,
		Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}},
	}
	if memory != "" {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}}
	}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
