package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/vfio"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// pciBusIDAttr is the standard attribute KubeVirt reads a passed GPU's
// address from in the device metadata file.
const pciBusIDAttr = "resource.kubernetes.io/pciBusID"

// vmPod is one VM-shaped pod of demo/21-vm-passthrough.yaml, the nodes
// with passthrough on that have its model, and the host driver its GPU
// leaves for vfio-pci and comes back to.
type vmPod struct {
	pod        string
	nodes      []string
	hostDriver string
}

// TestPassthrough: GPUs passed through to virtual machines on the nodes
// whose agents run with --passthrough (localcluster.DefaultNodes).
func TestPassthrough(t *testing.T) {
	// The demo's VM-shaped pods: an H100 and an MI300X each on vfio-pci
	// while the pod runs, the container given /dev/vfio and the metadata
	// file with the GPU's PCI address, the GPU off the node's published
	// devices; back on its host driver and published after.
	t.Run("vm-pods", func(t *testing.T) {
		ctx := context.Background()
		ns := namespace(t)
		// Namespaces stay after a test; its pods must not hold GPUs the next tests need.
		t.Cleanup(func() { deleteAll(t, ns) })
		sc, err := scenario.Load(filepath.Join(repo, "demo", "21-vm-passthrough.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Apply(ctx, client, ns); err != nil {
			t.Fatal(err)
		}
		vms := []vmPod{{"vm-h100", []string{"gpu-h100", dynamicNode}, "nvidia"}, {"vm-mi300x", []string{"gpu-mi300x"}, "amdgpu"}}
		if err := scenario.WaitRunning(ctx, client, ns, []string{vms[0].pod, vms[1].pod}, 120*time.Second); err != nil {
			t.Fatal(err)
		}
		passed := map[string]string{} // pod -> PCI address
		ranOn := map[string]string{}  // pod -> node
		for _, vm := range vms {
			p, err := client.CoreV1().Pods(ns).Get(ctx, vm.pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(vm.nodes, p.Spec.NodeName) {
				t.Errorf("%s ran on %s, want one of %v (the nodes with passthrough and its model)", vm.pod, p.Spec.NodeName, vm.nodes)
			}
			ranOn[vm.pod] = p.Spec.NodeName
			claim := claimOfPod(t, p)
			dev := allocatedDevice(t, ns, claim)
			ctr, err := record.Read(cluster.RecordDir(p.Spec.NodeName), ns, vm.pod, "vmm")
			if err != nil {
				t.Fatal(err)
			}
			md := containerMetadata(t, ctr)
			attrs := metadataAttrs(t, md, dev)
			addr := scenario.AttrString(attrs[pciBusIDAttr])
			group := scenario.AttrString(attrs["iommuGroup"])
			if addr == "" || group == "" || scenario.AttrString(attrs["passthrough"]) != "true" {
				t.Fatalf("%s: metadata of %s says pciBusID %q, iommuGroup %q, passthrough %q", vm.pod, dev, addr, group, scenario.AttrString(attrs["passthrough"]))
			}
			passed[vm.pod] = addr
			checkVFIONodes(t, ctr, group)
			if got := driverOn(t, p.Spec.NodeName, addr); got != vfio.Driver {
				t.Errorf("%s: GPU %s (%s) is on %q while the pod runs, want %s", vm.pod, dev, addr, got, vfio.Driver)
			}
			if published(t, p.Spec.NodeName, dev) {
				t.Errorf("%s: %s/%s is published while it is passed through", vm.pod, p.Spec.NodeName, dev)
			}
		}

		if err := sc.Delete(ctx, client, ns, 120*time.Second); err != nil {
			t.Fatal(err)
		}
		for _, vm := range vms {
			addr, node := passed[vm.pod], ranOn[vm.pod]
			if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
				got := driverOn(t, node, addr)
				return got == vm.hostDriver, fmt.Sprintf("GPU %s on %s is on %q", addr, node, got)
			}); err != nil {
				t.Errorf("%s's GPU not given back to %s: %v", vm.pod, vm.hostDriver, err)
			}
			if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
				return publishedAt(t, node, addr), "no device of " + addr + " published"
			}); err != nil {
				t.Errorf("%s's GPU not published again: %v", vm.pod, err)
			}
		}
	})

	// A GPU holding a MIG slice of a running pod is not passed: the
	// scheduler keeps a claim of the class off it (its whole device
	// shares the slice's counters), and a claim allocated it by hand is
	// refused by the node's agent, naming the device; the slice is left
	// as it was.
	t.Run("refused-beside-mig-slices", func(t *testing.T) {
		ctx := context.Background()
		ns := namespace(t)
		// Namespaces stay after a test; its pods must not hold GPUs the next tests need.
		t.Cleanup(func() { deleteAll(t, ns) })
		migPod(t, ns, "slice", dynamicNode, "1g.10gb")
		if err := scenario.WaitRunning(ctx, client, ns, []string{"slice"}, 120*time.Second); err != nil {
			t.Fatal(err)
		}
		sliceDev := allocatedDevice(t, ns, "slice")
		gpu, _, ok := strings.Cut(sliceDev, "-mig-")
		if !ok {
			t.Fatalf("slice got %s, not a MIG placement", sliceDev)
		}
		before := simState(t, dynamicNode).partitions

		// Through the scheduler: nothing of the GPU can be allocated.
		uuid := str(device(t, dynamicNode, gpu), "uuid")
		claimPod(t, ns, "vm-scheduled", dynamicNode, resourceapi.ExactDeviceRequest{
			DeviceClassName: names.VFIOClass,
			Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].uuid == "` + uuid + `"`}}},
		})
		msg, err := scenario.WaitUnschedulable(ctx, client, ns, "vm-scheduled", 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, "cannot allocate all claims") {
			t.Errorf("scheduler's reason %q does not say the claim cannot be allocated", msg)
		}

		// Allocated by hand, as a scheduler bug would: the agent refuses.
		handAllocatedVFIOPod(t, ctx, ns, "vm-forced", dynamicNode, gpu)
		msg, err = scenario.WaitPrepareFailed(ctx, client, ns, "vm-forced", 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, "device "+gpu) || !(strings.Contains(msg, "in use by another prepared claim") || strings.Contains(msg, "partition(s)")) {
			t.Errorf("the agent's refusal %q does not name %s and the slice holding it", msg, gpu)
		}
		if after := simState(t, dynamicNode).partitions; len(after) != len(before) {
			t.Errorf("partitions %+v after the refusal, were %+v", after, before)
		}
		if addr := pciOf(t, dynamicNode, gpu); driverOn(t, dynamicNode, addr) != "nvidia" {
			t.Errorf("%s (%s) left its driver after a refused passthrough", gpu, addr)
		}
	})
}

// TestPassthroughCutShort: an agent killed between a passthrough's unbind
// and bind, its record lost with it, leaves the GPU on no driver with
// vfio-pci as its override; the next agent's start gives it back to its
// host driver and the node publishes it again. (With the record kept,
// every crash point is internal/claims' TestPassthroughCrashAtEveryStep.)
// The cut-short state is written while the agent is down, through the
// simulated kernel's sysfs, as vfio.Bind leaves it when stopped there.
func TestPassthroughCutShort(t *testing.T) {
	ctx := context.Background()
	node := "gpu-h100"
	addr := pciOf(t, node, "gpu-6")
	restartPlugin(t, node, func() {
		m, err := sim.Profile(nodeByName(t, node).Profile, node)
		if err != nil {
			t.Fatal(err)
		}
		tree, err := simfs.Open(filepath.Join(simDir(node), "sys"), m.PCI)
		if err != nil {
			t.Fatal(err)
		}
		stop := errors.New("agent killed")
		if err := vfio.Bind(tree, addr, func(st vfio.Step) error {
			if st == vfio.StepUnbound {
				return stop
			}
			return nil
		}); !errors.Is(err, stop) {
			t.Fatalf("cut a passthrough of %s short: %v", addr, err)
		}
		if d := driverOn(t, node, addr); d != "" {
			t.Fatalf("cut short between unbind and bind: %s on %q, want no driver", addr, d)
		}
		// The stopped agent's slices still list the GPU; without them the
		// poll below sees only what the next agent publishes.
		if err := client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + names.DriverName,
		}); err != nil {
			t.Fatal(err)
		}
	})
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		d := driverOn(t, node, addr)
		return d == "nvidia", fmt.Sprintf("%s on %q", addr, d)
	}); err != nil {
		t.Fatalf("the restarted agent did not give the GPU back: %v", err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		return publishedAt(t, node, addr), "no device of " + addr + " published"
	}); err != nil {
		t.Error(err)
	}
}

// TestPassthroughKilledMidPrepare: an agent SIGKILLed in the middle of a
// passthrough, after it saved the claim PrepareStarted with what it moves
// and unbound the GPU from its host driver but before vfio-pci bound it,
// leaves the GPU on no driver and its record in the checkpoint; the next
// agent rolls the claim back at start, the kubelet's retried prepare
// passes the GPU, the pod runs with the VFIO nodes, and once it is deleted
// the GPU is back on its driver and published. The simulated kernel holds
// vfio-pci's bind of the GPU while the test's hold file exists
// (internal/sim hold.go), so the kill lands at that point every run.
func TestPassthroughKilledMidPrepare(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	// Namespaces stay after a test; its pod must not hold a GPU the next tests need.
	t.Cleanup(func() { deleteAll(t, ns) })
	const node, gpu = "gpu-h100", "gpu-5"
	addr := pciOf(t, node, gpu)
	hold := holdBind(t, node, addr)
	uid := claimPod(t, ns, "vm", node, resourceapi.ExactDeviceRequest{
		DeviceClassName: names.VFIOClass,
		Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].uuid == "` + str(device(t, node, gpu), "uuid") + `"`}}},
	})
	if err := scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
		rec, st := passRecord(node, uid)
		d := driverOn(t, node, addr)
		return rec != nil && st == checkpoint.PrepareStarted && d == "", fmt.Sprintf("claim %s recorded %q (passthrough %+v), %s on %q", uid, st, rec, addr, d)
	}); err != nil {
		t.Fatalf("the agent never got between unbind and bind: %v", err)
	}
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.KillPlugin(s, node); err != nil {
		t.Fatal(err)
	}
	if d := driverOn(t, node, addr); d != "" {
		t.Fatalf("after the kill %s is on %q, want no driver", addr, d)
	}
	rec, st := passRecord(node, uid)
	if rec == nil || st != checkpoint.PrepareStarted || rec.Bound || !slices.ContainsFunc(rec.Functions, func(f checkpoint.VFIOFunction) bool { return f.Address == addr && f.Driver == "nvidia" }) {
		t.Fatalf("after the kill the checkpoint has claim %s %q with passthrough %+v, want PrepareStarted, not bound, %s from nvidia", uid, st, rec, addr)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StartPlugin(s, nodeByName(t, node)); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitRunning(ctx, client, ns, []string{"vm"}, 120*time.Second); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	checkPassedAfterCrash(t, ns, node, gpu, addr, uid)

	deleteAll(t, ns)
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		d := driverOn(t, node, addr)
		return d == "nvidia", fmt.Sprintf("%s on %q", addr, d)
	}); err != nil {
		t.Errorf("the GPU was not given back after the pod: %v", err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		return publishedAt(t, node, addr), "no device of " + addr + " published"
	}); err != nil {
		t.Error(err)
	}
}

// holdBind makes the node's simulated kernel hold vfio-pci's bind of the
// function at addr until the returned file is removed; the test's end
// removes it in any case, so no later test finds the node's binds held.
func holdBind(t *testing.T, node, addr string) string {
	t.Helper()
	hold := sim.HoldBindPath(simDir(node), addr)
	if err := os.MkdirAll(filepath.Dir(hold), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(hold); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Error(err)
		}
	})
	return hold
}

// passRecord is the passthrough the node's checkpoint records for claim
// uid, and the claim's state; nil and "" while it has none (or the file
// is caught between write and rename).
func passRecord(node, uid string) (*checkpoint.VFIO, checkpoint.State) {
	cp, err := checkpoint.Read(cluster.CheckpointPath(node))
	if err != nil || cp.Claims[uid] == nil {
		return nil, ""
	}
	c := cp.Claims[uid]
	for _, d := range c.Devices {
		if d.VFIO != nil {
			return d.VFIO, c.State
		}
	}
	return nil, c.State
}

// checkPassedAfterCrash: the claim the restarted agent prepared again
// holds gpu (at addr) on vfio-pci, recorded bound, and the pod's
// container has the VFIO nodes and the metadata file with its address.
func checkPassedAfterCrash(t *testing.T, ns, node, gpu, addr, uid string) {
	t.Helper()
	rec, st := passRecord(node, uid)
	if rec == nil || st != checkpoint.PrepareCompleted || !rec.Bound {
		t.Fatalf("claim %s is %q with passthrough %+v after the restart, want PrepareCompleted and bound", uid, st, rec)
	}
	if d := driverOn(t, node, addr); d != vfio.Driver {
		t.Errorf("%s (%s) is on %q while the pod runs, want %s", gpu, addr, d, vfio.Driver)
	}
	ctr, err := record.Read(cluster.RecordDir(node), ns, "vm", "work")
	if err != nil {
		t.Fatal(err)
	}
	checkVFIONodes(t, ctr, strconv.Itoa(rec.Group))
	if got := scenario.AttrString(metadataAttrs(t, containerMetadata(t, ctr), gpu)[pciBusIDAttr]); got != addr {
		t.Errorf("container %s: metadata of %s says %s %q, want %q", ctr.ContainerName, gpu, pciBusIDAttr, got, addr)
	}
}

// claimOfPod is the name of the claim generated for the pod's only
// template claim.
func claimOfPod(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	t.Fatalf("pod %s has no generated claim", p.Name)
	return ""
}

// containerMetadata decodes the device metadata file the container
// mounts, from its source on the host, with the library a reader in the
// container would use (scenario.DecodeMetadata).
func containerMetadata(t *testing.T, ctr *record.Container) *metadata.DeviceMetadata {
	t.Helper()
	for _, m := range ctr.Mounts {
		if !scenario.IsMetadataFile(m.Destination) {
			continue
		}
		data, err := os.ReadFile(m.Source)
		if err != nil {
			t.Fatal(err)
		}
		md, err := scenario.DecodeMetadata(data)
		if err != nil {
			t.Fatalf("decode %s: %v", m.Source, err)
		}
		return md
	}
	t.Fatalf("container %s mounts no device metadata file (mounts %+v)", ctr.ContainerName, ctr.Mounts)
	return nil
}

// metadataAttrs are the attributes the metadata gives device dev.
func metadataAttrs(t *testing.T, md *metadata.DeviceMetadata, dev string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	t.Helper()
	for _, r := range md.Requests {
		for _, d := range r.Devices {
			if d.Name == dev && d.Driver == names.DriverName {
				return d.Attributes
			}
		}
	}
	t.Fatalf("metadata of claim %s has no device %s: %+v", md.Name, dev, md.Requests)
	return nil
}

// checkVFIONodes: the container has the VFIO container node and its
// group's, and none of a GPU vendor's.
func checkVFIONodes(t *testing.T, ctr *record.Container, group string) {
	t.Helper()
	has := map[string]bool{}
	for _, d := range ctr.Devices {
		has[d.Path] = true
		if nvidiaGPU.MatchString(d.Path) || render.MatchString(d.Path) || card.MatchString(d.Path) || d.Path == "/dev/kfd" || d.Path == "/dev/nvidiactl" {
			t.Errorf("container %s has %s of a GPU's host driver", ctr.ContainerName, d.Path)
		}
	}
	for _, want := range []string{"/dev/vfio/vfio", "/dev/vfio/" + group} {
		if !has[want] {
			t.Errorf("container %s lacks %s (devices %v)", ctr.ContainerName, want, ctr.DevicePaths())
		}
	}
	if env, ok := ctr.Getenv("NVIDIA_VISIBLE_DEVICES"); ok {
		t.Errorf("container %s: NVIDIA_VISIBLE_DEVICES=%q for a passed GPU", ctr.ContainerName, env)
	}
}

// driverOn is the driver the node's simulated sysfs shows bound to the
// PCI function at addr ("" for none).
func driverOn(t *testing.T, node, addr string) string {
	t.Helper()
	d, err := vfio.DriverOf(vfio.HostSysfs(filepath.Join(simDir(node), "sys")), addr)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// published reports whether the node publishes device dev.
func published(t *testing.T, node, dev string) bool {
	t.Helper()
	for _, s := range nodeSlices(t, node) {
		for _, d := range s.Spec.Devices {
			if d.Name == dev {
				return true
			}
		}
	}
	return false
}

// publishedAt reports whether the node publishes a whole GPU at PCI
// address addr.
func publishedAt(t *testing.T, node, addr string) bool {
	t.Helper()
	for _, s := range nodeSlices(t, node) {
		for _, d := range s.Spec.Devices {
			if str(d, "type") == "gpu" && scenario.AttrString(d.Attributes[pciBusIDAttr]) == addr {
				return true
			}
		}
	}
	return false
}

// pciOf is the PCI address of a published whole GPU.
func pciOf(t *testing.T, node, dev string) string {
	t.Helper()
	addr := scenario.AttrString(device(t, node, dev).Attributes[pciBusIDAttr])
	if addr == "" {
		t.Fatalf("%s/%s publishes no %s", node, dev, pciBusIDAttr)
	}
	return addr
}

// handAllocatedVFIOPod creates a claim of the vfio class allocated device
// dev of node by hand (as the scheduler would write it, were it wrong)
// and a pod of it on node.
func handAllocatedVFIOPod(t *testing.T, ctx context.Context, ns, name, node, dev string) {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: names.VFIOClass},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The pod names its node, so no scheduler takes part (one would
	// allocate the claim again in its own cache and fail to reserve it),
	// and the kubelet prepares once the claim is reserved for it.
	claimName := name
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:       node,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claimName}},
			Containers: []corev1.Container{{
				Name: "vmm", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: names.DriverName, Pool: node, Device: dev,
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocate claim %s by hand: %v", name, err)
	}
}
