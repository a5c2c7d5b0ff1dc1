package doctor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/tessera-gpu/tessera/internal/deviceclasses"
	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
	"github.com/tessera-gpu/tessera/internal/names"
)

var doctorNow = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// Nodes of the healthy input: a whole-GPU node, a static MIG node and a
// dynamic node, each labelled as the local cluster labels them.
var doctorNodes = map[string]string{
	"dgx-h100-0":     names.PartitioningStatic,
	"dgx-h100-mig-0": names.PartitioningStatic,
	"dgx-h100-dyn":   names.PartitioningDynamic,
}

func readyNode(name, partitioning string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if partitioning != "" {
		n.Labels = map[string]string{PartitioningLabel: partitioning}
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Status.NodeInfo.KubeletVersion = "v1.37.0"
	return n
}

// shippedClasses are the DeviceClasses of internal/deviceclasses.
func shippedClasses(t *testing.T) []resourceapi.DeviceClass {
	t.Helper()
	var out []resourceapi.DeviceClass
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(deviceclasses.YAML), 4096)
	for {
		var c resourceapi.DeviceClass
		if err := d.Decode(&c); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if c.Kind == "DeviceClass" {
			out = append(out, c)
		}
	}
	return out
}

func healthyInput(t *testing.T) *Input {
	t.Helper()
	s := inspecttest.Load(t, "dgx-h100.yaml", "dgx-h100-mig.yaml", "dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml")
	in := &Input{
		Slices:    s.Slices,
		Claims:    s.Claims,
		Classes:   shippedClasses(t),
		Readiness: map[string]Readiness{},
		Now:       doctorNow,
	}
	for name, p := range doctorNodes {
		in.NodeObjects = append(in.NodeObjects, readyNode(name, p))
		in.Readiness[name] = Readiness{State: ReadyOK, Via: "pod tessera/tessera-" + name, Detail: "ok"}
	}
	return in
}

func TestShippedDeviceClassesMatchTheFile(t *testing.T) {
	var names []string
	for _, c := range shippedClasses(t) {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, ShippedDeviceClasses) {
		t.Errorf("internal/deviceclasses has %v; ShippedDeviceClasses is %v", names, ShippedDeviceClasses)
	}
}

func TestDoctorHealthy(t *testing.T) {
	in := healthyInput(t)
	fs := Run(in)
	for _, f := range fs {
		if f.Status != StatusPass {
			t.Errorf("%s %s: %s", f.Status, f.Name(), f.Detail)
		}
	}
	// Every check ran once per node, the fleet one once.
	for _, check := range []string{CheckNode, CheckSlices, CheckReadyz, CheckHealth, CheckPrepare, CheckPartitioning} {
		for node := range doctorNodes {
			if n := countFindings(fs, node+"/"+check); n != 1 {
				t.Errorf("%s/%s: %d findings, want 1", node, check, n)
			}
		}
	}
	if n := countFindings(fs, CheckDeviceClasses); n != 1 {
		t.Errorf("deviceclasses: %d findings, want 1", n)
	}
	var b bytes.Buffer
	if err := Print(&b, fs); err != nil {
		t.Errorf("Print: %v, want nil when all pass", err)
	}
	t.Logf("\n%s", b.String())
	for _, want := range []string{
		"PASS  dgx-h100-dyn/slices   ",
		"   pool dgx-h100-dyn generation 1: 5 of 5 slices published, 208 devices\n",
		"PASS  dgx-h100-dyn/partitioning    " + PartitioningLabel + "=dynamic; 8 GPUs",
		"=dynamic; 8 GPUs: 8 dynamic (a counter set each); every counter set has placements\n",
		"PASS  dgx-h100-mig-0/partitioning  " + PartitioningLabel + "=static; 8 GPUs: 6 whole only, 2 partitions only (MIG mode)\n",
		"\n19 checks: 19 passed, 0 warnings, 0 failed\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func countFindings(fs []Finding, name string) int {
	n := 0
	for _, f := range fs {
		if f.Name() == name {
			n++
		}
	}
	return n
}

// doctorExpect is a finding a broken input must yield: its status, its name
// (NODE/check) and words of its detail.
type doctorExpect struct {
	status Status
	name   string
	detail []string
}

func TestDoctorBroken(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Input)
		want []doctorExpect // every finding that is not a PASS
	}{
		{
			name: "missing class",
			edit: func(in *Input) {
				in.Classes = slices.DeleteFunc(in.Classes, func(c resourceapi.DeviceClass) bool { return c.Name == "mig.gpu.tessera.dev" })
			},
			want: []doctorExpect{{StatusFail, "deviceclasses", []string{"missing 1 of 7", "mig.gpu.tessera.dev"}}},
		},
		{
			name: "classes unreadable",
			edit: func(in *Input) { in.Classes, in.ClassesErr = nil, "forbidden" },
			want: []doctorExpect{{StatusWarn, "deviceclasses", []string{"could not list", "forbidden"}}},
		},
		{
			name: "missing slice of a generation",
			edit: func(in *Input) {
				i := slices.IndexFunc(in.Slices, func(s resourceapi.ResourceSlice) bool { return s.Spec.Pool.Name == "dgx-h100-dyn" })
				in.Slices = slices.Delete(in.Slices, i, i+1)
			},
			want: []doctorExpect{{StatusFail, "dgx-h100-dyn/slices", []string{"pool dgx-h100-dyn generation 1: 4 of 5 slices"}}},
		},
		{
			name: "older generation left over",
			edit: func(in *Input) {
				i := slices.IndexFunc(in.Slices, func(s resourceapi.ResourceSlice) bool { return s.Spec.Pool.Name == "dgx-h100-0" })
				old := in.Slices[i].DeepCopy()
				old.Spec.Pool.Generation = 0
				// A device of the old generation only: not a GPU of the node.
				old.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "gpu.tessera.dev/lost", Value: "true", Effect: resourceapi.DeviceTaintEffectNoExecute}}
				in.Slices = append(in.Slices, *old)
			},
			want: []doctorExpect{{StatusWarn, "dgx-h100-0/slices", []string{"1 slices of older generation 0", "beside generation 1"}}},
		},
		{
			name: "named node without slices",
			edit: func(in *Input) {
				in.Nodes = []string{"dgx-h100-0", "cpu-0"}
				in.NodeObjects = append(in.NodeObjects, readyNode("cpu-0", ""))
				in.Readiness["cpu-0"] = Readiness{Detail: "no agent pod found (the agent may run as a host process); readiness not checked"}
			},
			want: []doctorExpect{
				{StatusFail, "cpu-0/slices", []string{"no ResourceSlices: the agent is not running or not registered on cpu-0"}},
				{StatusWarn, "cpu-0/readyz", []string{"no agent pod found"}},
			},
		},
		{
			name: "named node that does not exist",
			edit: func(in *Input) { in.Nodes = []string{"ghost"} },
			want: []doctorExpect{
				{StatusFail, "ghost/node", []string{"node ghost does not exist"}},
				{StatusFail, "ghost/slices", []string{"no ResourceSlices", "on ghost"}},
			},
		},
		{
			name: "NotReady node",
			edit: func(in *Input) {
				n := nodeObj(in, "dgx-h100-0")
				n.Status.Conditions[0].Status = corev1.ConditionUnknown
				n.Status.Conditions[0].Reason = "NodeStatusUnknown"
				n.Status.Conditions[0].Message = "Kubelet stopped posting node status."
			},
			want: []doctorExpect{{StatusFail, "dgx-h100-0/node", []string{"NotReady", "NodeStatusUnknown", "Kubelet stopped posting"}}},
		},
		{
			name: "cordoned node",
			edit: func(in *Input) { nodeObj(in, "dgx-h100-0").Spec.Unschedulable = true },
			want: []doctorExpect{{StatusWarn, "dgx-h100-0/node", []string{"cordoned"}}},
		},
		{
			name: "slices of a node that does not exist",
			edit: func(in *Input) {
				in.NodeObjects = slices.DeleteFunc(in.NodeObjects, func(n corev1.Node) bool { return n.Name == "dgx-h100-mig-0" })
			},
			want: []doctorExpect{{StatusFail, "dgx-h100-mig-0/node", []string{"does not exist", "ResourceSlices name it (stale slices)"}}},
		},
		{
			name: "tainted device",
			edit: func(in *Input) {
				inspecttest.Taint(&inspect.Snapshot{Slices: in.Slices}, "gpu-3", resourceapi.DeviceTaint{Key: "gpu.tessera.dev/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute})
			},
			// gpu-3 of all three nodes; on the dynamic node on its
			// placements too; on the MIG node gpu-3 is whole.
			want: []doctorExpect{
				{StatusWarn, "dgx-h100-0/health", []string{"gpu-3 tainted: gpu.tessera.dev/xid=79:NoExecute"}},
				{StatusWarn, "dgx-h100-mig-0/health", []string{"gpu-3 tainted: gpu.tessera.dev/xid=79:NoExecute"}},
				{StatusWarn, "dgx-h100-dyn/health", []string{"gpu-3 tainted: gpu.tessera.dev/xid=79:NoExecute"}},
			},
		},
		{
			name: "tainted partitions of a MIG GPU",
			edit: func(in *Input) {
				for i := range in.Slices {
					for j := range in.Slices[i].Spec.Devices {
						if d := &in.Slices[i].Spec.Devices[j]; strings.HasPrefix(d.Name, "gpu-6-") && in.Slices[i].Spec.Pool.Name == "dgx-h100-mig-0" {
							d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: "gpu.tessera.dev/row-remap", Value: "pending", Effect: resourceapi.DeviceTaintEffectNoSchedule})
						}
					}
				}
			},
			want: []doctorExpect{{StatusWarn, "dgx-h100-mig-0/health", []string{"gpu-6 tainted: gpu.tessera.dev/row-remap=pending:NoSchedule (on ", "partitions)"}}},
		},
		{
			name: "Prepared=False claim",
			edit: func(in *Input) {
				c := &in.Claims[0] // default/train: gpu-0, gpu-1 of dgx-h100-dyn
				long := "CDI spec for claim default/train: write /var/run/cdi/gpu.tessera.dev-train.json: " + strings.Repeat("no space left on device ", 20)
				for _, r := range c.Status.Allocation.Devices.Results {
					c.Status.Devices = append(c.Status.Devices, resourceapi.AllocatedDeviceStatus{
						Driver: r.Driver, Pool: r.Pool, Device: r.Device,
						Conditions: []metav1.Condition{{Type: names.ConditionPrepared, Status: metav1.ConditionFalse, Reason: "CDIWriteFailed", Message: long}},
					})
				}
			},
			want: []doctorExpect{{StatusFail, "dgx-h100-dyn/prepare", []string{"claim default/train: Prepared=False on gpu-0,gpu-1: CDIWriteFailed: CDI spec for claim", "…"}}},
		},
		{
			name: "failed-prepare events",
			edit: func(in *Input) {
				in.Events = []corev1.Event{
					prepEvent("default", "train-0", "dgx-h100-dyn", doctorNow.Add(-10*time.Minute), 3, "prepare dynamic resources: NodePrepareResources failed for claim default/train: boom"),
					prepEvent("default", "train-0", "dgx-h100-dyn", doctorNow.Add(-5*time.Minute), 1, "latest: boom again"),
					prepEvent("default", "old", "dgx-h100-dyn", doctorNow.Add(-2*time.Hour), 1, "too old"),
					prepEvent("ml", "lost-pod", "", doctorNow.Add(-time.Minute), 1, "no host"),
				}
				other := prepEvent("default", "x", "dgx-h100-0", doctorNow, 1, "other reason")
				other.Reason = "FailedMount"
				in.Events = append(in.Events, other)
			},
			want: []doctorExpect{
				{StatusWarn, "dgx-h100-dyn/prepare", []string{"pod default/train-0", "x4 in the last hour", "latest: latest: boom again"}},
				{StatusWarn, "prepare", []string{"pod ml/lost-pod (node unknown)"}},
			},
		},
		{
			name: "readyz failing",
			edit: func(in *Input) {
				in.Readiness["dgx-h100-0"] = Readiness{State: ReadyFailed, Via: "http://127.0.0.1:40001/readyz", Detail: "HTTP 503: not ready: not registered with the kubelet yet"}
			},
			want: []doctorExpect{{StatusFail, "dgx-h100-0/readyz", []string{"not ready (http://127.0.0.1:40001/readyz): HTTP 503: not ready: not registered with the kubelet yet"}}},
		},
		{
			name: "readyz not asked",
			edit: func(in *Input) { delete(in.Readiness, "dgx-h100-0") },
			want: []doctorExpect{{StatusWarn, "dgx-h100-0/readyz", []string{"not checked"}}},
		},
		{
			name: "static label on a dynamic node",
			edit: func(in *Input) { nodeObj(in, "dgx-h100-dyn").Labels[PartitioningLabel] = names.PartitioningStatic },
			want: []doctorExpect{{StatusWarn, "dgx-h100-dyn/partitioning", []string{"labelled static, but counter sets", "gpu-0,gpu-1"}}},
		},
		{
			name: "dynamic label on a static MIG node",
			edit: func(in *Input) { nodeObj(in, "dgx-h100-mig-0").Labels[PartitioningLabel] = names.PartitioningDynamic },
			want: []doctorExpect{{StatusWarn, "dgx-h100-mig-0/partitioning", []string{"labelled dynamic, but gpu-6,gpu-7 publish static partitions"}}},
		},
		{
			name: "counter set without placements",
			edit: func(in *Input) {
				for i := range in.Slices {
					in.Slices[i].Spec.Devices = slices.DeleteFunc(in.Slices[i].Spec.Devices, func(d resourceapi.Device) bool {
						return strings.HasPrefix(d.Name, "gpu-2-")
					})
				}
			},
			want: []doctorExpect{{StatusWarn, "dgx-h100-dyn/partitioning", []string{"counter set gpu-2 published without placement devices", PartitioningLabel + "=dynamic"}}},
		},
		{
			name: "no slices anywhere",
			edit: func(in *Input) { in.Slices = nil },
			want: []doctorExpect{{StatusFail, "slices", []string{"no ResourceSlices of driver gpu.tessera.dev in the cluster"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := healthyInput(t)
			tc.edit(in)
			fs := Run(in)
			var got []Finding
			for _, f := range fs {
				if f.Status != StatusPass {
					got = append(got, f)
				}
			}
			for _, w := range tc.want {
				i := slices.IndexFunc(got, func(f Finding) bool {
					if f.Status != w.status || f.Name() != w.name {
						return false
					}
					for _, d := range w.detail {
						if !strings.Contains(f.Detail, d) {
							return false
						}
					}
					return true
				})
				if i < 0 {
					t.Errorf("no %s %s with %q in\n%s", w.status, w.name, w.detail, dumpFindings(fs))
					continue
				}
				if got[i].Fix == "" {
					t.Errorf("%s %s has no fix", got[i].Status, got[i].Name())
				}
				got = slices.Delete(got, i, i+1)
			}
			for _, f := range got {
				t.Errorf("unexpected %s %s: %s", f.Status, f.Name(), f.Detail)
			}
			var b bytes.Buffer
			err := Print(&b, fs)
			var failed *ChecksFailedError
			wantFail := slices.ContainsFunc(tc.want, func(e doctorExpect) bool { return e.status == StatusFail })
			if errors.As(err, &failed) != wantFail {
				t.Errorf("Print error %v; want a ChecksFailedError: %v", err, wantFail)
			}
			t.Logf("\n%s", b.String())
		})
	}
}

func nodeObj(in *Input, name string) *corev1.Node {
	for i := range in.NodeObjects {
		if in.NodeObjects[i].Name == name {
			return &in.NodeObjects[i]
		}
	}
	panic("no node " + name)
}

func prepEvent(ns, pod, host string, at time.Time, n int32, msg string) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", pod, at.UnixNano()), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod},
		Reason:         ReasonFailedPrepare,
		Message:        msg,
		Source:         corev1.EventSource{Component: "kubelet", Host: host},
		Count:          n,
		LastTimestamp:  metav1.NewTime(at),
		Type:           corev1.EventTypeWarning,
	}
}

func dumpFindings(fs []Finding) string {
	var b bytes.Buffer
	_ = Print(&b, fs)
	return b.String()
}

func TestPrintDoctorFormat(t *testing.T) {
	fs := []Finding{
		{Status: StatusPass, Check: CheckDeviceClasses, Detail: "all 5 installed", Fix: "not printed on PASS"},
		{Status: StatusFail, Check: CheckSlices, Node: "n1", Detail: "no ResourceSlices", Fix: "check the agent"},
		{Status: StatusWarn, Check: CheckHealth, Node: "n1", Detail: "gpu-0 tainted"},
	}
	var b bytes.Buffer
	err := Print(&b, fs)
	want := "PASS  deviceclasses  all 5 installed\n" +
		"FAIL  n1/slices      no ResourceSlices  fix: check the agent\n" +
		"WARN  n1/health      gpu-0 tainted\n" +
		"\n3 checks: 1 passed, 1 warnings, 1 failed\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	var failed *ChecksFailedError
	if !errors.As(err, &failed) || failed.Failed != 1 || failed.Warned != 1 {
		t.Errorf("err = %#v, want ChecksFailedError{1, 1}", err)
	}
}

func TestTruncateMessage(t *testing.T) {
	if got := truncateMessage("a  b\n c", 10); got != "a b c" {
		t.Errorf("got %q", got)
	}
	if got := truncateMessage(strings.Repeat("é", 300), 200); len([]rune(got)) != 201 || !strings.HasSuffix(got, "…") {
		t.Errorf("got %d runes", len([]rune(got)))
	}
}
