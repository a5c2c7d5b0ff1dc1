package doctor

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stoppedAgentPod is an agent pod on node whose container last stopped with msg
// (nil: running, never stopped); current puts it in the present state
// instead (a container that just exited).
func stoppedAgentPod(node, msg string, current bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tessera-system", Name: "tessera-" + node}, Spec: corev1.PodSpec{NodeName: node}}
	cs := corev1.ContainerStatus{Name: "tessera-kubelet-plugin"}
	switch {
	case msg == "":
		cs.State.Running = &corev1.ContainerStateRunning{}
	case current:
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Message: msg}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Message: msg}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	return p
}

func TestCheckDriver(t *testing.T) {
	const lib = "driverroot: libnvidia-ml.so.1 not found under the driver root /run/nvidia/driver (mounted at /driver-root) (tried /driver-root/usr/lib64/libnvidia-ml.so.1, /driver-root/lib64/libnvidia-ml.so.1; /driver-root/lib64/libnvidia-ml.so.1: not a regular file (mode drwxr-xr-x))"
	const mpsMissing = "driverroot: nvidia-cuda-mps-control not found under the driver root /var/lib/tessera/sim-driver (mounted at /driver-root) (tried /driver-root/usr/bin/nvidia-cuda-mps-control, /driver-root/opt/bin/nvidia-cuda-mps-control)"
	for _, tc := range []struct {
		name string
		in   Input
		want []Finding
	}{
		{name: "auto found no GPUs", in: Input{AgentPods: map[string][]corev1.Pod{
			"gpu-1": {stoppedAgentPod("gpu-1", "I1207 log line\ntessera-kubelet-plugin: --backend=auto: no GPUs found: nvml: "+lib+"; amd: no KFD topology (use --backend=sim for simulated GPUs)\n", false)},
			"gpu-2": {stoppedAgentPod("gpu-2", "", false)},
		}}, want: []Finding{{Status: StatusFail, Check: CheckDriver, Node: "gpu-1", Detail: "node gpu-1: " + lib}}},
		{name: "sim stand-in missing, json log", in: Input{AgentPods: map[string][]corev1.Pod{
			"sim-1": {stoppedAgentPod("sim-1", `{"msg":"x"}`+"\ntessera-kubelet-plugin: --backend=sim: the MPS stand-in: "+mpsMissing+"\n", true)},
		}}, want: []Finding{{Status: StatusFail, Check: CheckDriver, Node: "sim-1", Detail: "node sim-1: " + mpsMissing}}},
		{name: "another error is not the driver's", in: Input{AgentPods: map[string][]corev1.Pod{
			"gpu-1": {stoppedAgentPod("gpu-1", "tessera-kubelet-plugin: --node-name is required", false)},
		}}, want: []Finding{{Status: StatusPass, Check: CheckDriver, Detail: "no agent reports a driver file missing (1 agent pods)"}}},
		{name: "pods not listed", in: Input{AgentPodsErr: "forbidden"}, want: []Finding{{Status: StatusWarn, Check: CheckDriver}}},
		{name: "no agents", in: Input{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkDriver(&tc.in, nil)
			if len(got) != len(tc.want) {
				t.Fatalf("findings %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Status != w.Status || g.Check != w.Check || g.Node != w.Node || (w.Detail != "" && g.Detail != w.Detail) {
					t.Errorf("finding %d = %+v, want %+v", i, g, w)
				}
				if g.Status == StatusFail && !strings.Contains(g.Fix, "nvidiaDriverRoot") {
					t.Errorf("fix %q does not name nvidiaDriverRoot", g.Fix)
				}
			}
		})
	}
}
