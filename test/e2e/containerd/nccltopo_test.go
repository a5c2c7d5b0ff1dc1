package containerd

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/nccltopo"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestNCCLTopoFileInContainer: a claim of four H100s asking for an NCCL
// topology file runs in a container created by containerd and runc that
// reads the file at NCCL_TOPO_FILE: the file the agent wrote for the claim,
// byte for byte, accepted by NCCL's parser rules, naming exactly the
// claim's GPUs, in the order CUDA_VISIBLE_DEVICES lists them. Deleting
// the pod removes the file from the node.
func TestNCCLTopoFileInContainer(t *testing.T) {
	ctx := context.Background()
	node := nodes[0].Name
	ns := namespace(t, "")
	t.Cleanup(func() { drain(t, ns) })
	waitWebhook(t)
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "four"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "nvidia.gpu.tessera.dev", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4,
			}}},
			Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver:     "gpu.tessera.dev",
				Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":true}}`)},
			}}}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, probePod("ranks", node, "four"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitRunning(ctx, client, ns, []string{"ranks"}, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods(ns).Get(ctx, "ranks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkContainer(t, ns, p, p.Spec.Containers[0])
	got := probeLog(t, ns, "ranks", "probe")
	uid := claimUID(t, ns, p, "gpu")
	if got.env[nccltopo.FileEnv] != "/etc/tessera/nccl-topo.xml" || !got.mounts["/etc/tessera/nccl-topo.xml"] {
		t.Fatalf("container: %s=%q, mounted %v", nccltopo.FileEnv, got.env[nccltopo.FileEnv], got.mounts["/etc/tessera/nccl-topo.xml"])
	}
	w, err := cdi.NewWriter(cdi.Options{SpecDir: cluster.CDIDir(node)})
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile(w.TopologyPath(uid))
	if err != nil {
		t.Fatal(err)
	}
	if got.topo != string(host) {
		t.Errorf("the container read\n%s\nthe node holds\n%s", got.topo, host)
	}
	if err := nccltopo.Check([]byte(got.topo), nccltopo.NCCL); err != nil {
		t.Errorf("NCCL's parser rules refuse the container's file: %v", err)
	}
	// One <gpu> per visible GPU, in CUDA_VISIBLE_DEVICES's order: rank i
	// is the i-th listed GPU.
	visible := strings.Split(got.env["CUDA_VISIBLE_DEVICES"], ",")
	if len(visible) != 4 || strings.Count(got.topo, "<gpu ") != 4 {
		t.Fatalf("CUDA_VISIBLE_DEVICES=%q, %d <gpu> elements: want the claim's 4 GPUs", got.env["CUDA_VISIBLE_DEVICES"], strings.Count(got.topo, "<gpu "))
	}
	for i := range visible {
		if !strings.Contains(got.topo, `rank="`+string(rune('0'+i))+`"`) {
			t.Errorf("no rank %d in the file", i)
		}
	}
	drain(t, ns)
	if _, err := os.Stat(w.TopologyPath(uid)); !os.IsNotExist(err) {
		t.Errorf("claim unprepared: its topology file %s: %v", w.TopologyPath(uid), err)
	}
}
