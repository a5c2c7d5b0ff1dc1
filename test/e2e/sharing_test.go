package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// Checks of the sharing scenarios (demo/10-13): what the node did for the
// claim's sharing config while the pods ran, and that it was undone after.

// mpsPipeInContainer is where a container sees its claim's MPS pipes.
const mpsPipeInContainer = "/tmp/nvidia-mps"

// sharedT4 is the GPU the time-sliced claim of demo 10 got, for its after-check.
var sharedT4 struct{ node, uuid string }

func checkTimeSliced(t *testing.T, pods map[string]got) {
	a, b := pods["notebook-a"], pods["notebook-b"]
	expectDevices(t, a, 1, func(d resourceapi.Device) bool { return str(d, "model") == "T4" })
	expectDevices(t, b, 1, func(d resourceapi.Device) bool { return str(d, "model") == "T4" })
	if a.placement.Node != b.placement.Node || a.devices[0].Name != b.devices[0].Name {
		t.Fatalf("the pods sharing one claim got %s/%s and %s/%s", a.placement.Node, a.devices[0].Name, b.placement.Node, b.devices[0].Name)
	}
	uuid := str(a.devices[0], "uuid")
	for _, g := range []got{a, b} {
		for _, ctr := range g.placement.Containers {
			if env, _ := ctr.Getenv("NVIDIA_VISIBLE_DEVICES"); env != uuid {
				t.Errorf("pod %s container %s sees %q, want the shared GPU %s", g.placement.Pod, ctr.ContainerName, env, uuid)
			}
		}
	}
	sharedT4.node, sharedT4.uuid = a.placement.Node, uuid
	if got := simState(t, a.placement.Node).timeSlice[uuid]; got != "Long" {
		t.Errorf("GPU %s on %s: time-slice interval %q while the claim is prepared, want Long", uuid, a.placement.Node, got)
	}
}

func afterTimeSliced(t *testing.T) {
	if got := simState(t, sharedT4.node).timeSlice[sharedT4.uuid]; got != "" {
		t.Errorf("GPU %s on %s: time-slice interval %q after both pods went, want the default", sharedT4.uuid, sharedT4.node, got)
	}
}

// mpsDaemon is the daemon demo 11's claim got, for its after-check.
var mpsDaemon struct {
	dir string
	pid int
}

func checkMPS(t *testing.T, pods map[string]got) {
	g := pods["mps-inference"]
	expectDevices(t, g, 1, func(d resourceapi.Device) bool { return str(d, "model") == "A100" })
	uuid := str(g.devices[0], "uuid")
	if len(g.placement.Containers) != 2 {
		t.Fatalf("%d containers recorded, want 2", len(g.placement.Containers))
	}
	pipe := ""
	for _, ctr := range g.placement.Containers {
		for k, want := range map[string]string{
			"CUDA_MPS_PIPE_DIRECTORY":           mpsPipeInContainer,
			"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=10240M",
			"CUDA_VISIBLE_DEVICES":              uuid,
		} {
			if v, _ := ctr.Getenv(k); v != want {
				t.Errorf("container %s: %s=%q, want %q", ctr.ContainerName, k, v, want)
			}
		}
		src := ""
		for _, m := range ctr.Mounts {
			if m.Destination == mpsPipeInContainer {
				src = m.Source
			}
		}
		if src == "" {
			t.Fatalf("container %s: no mount at %s: %+v", ctr.ContainerName, mpsPipeInContainer, ctr.Mounts)
		}
		if pipe != "" && src != pipe {
			t.Errorf("the two containers mount different pipe dirs %s and %s", pipe, src)
		}
		pipe = src
	}
	// The daemon is a real process (the simulator's stand-in) that was told
	// the claim's limits through the control protocol.
	st, err := standin.ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	if st.DefaultActiveThreadPercentage != 50 || st.DefaultPinnedMemLimits[uuid] != "10240M" || strings.Join(st.Devices, ",") != uuid {
		t.Errorf("daemon was told %+v, want devices [%s], 50%% threads, 10240M pinned", st, uuid)
	}
	if !processAlive(st.PID) {
		t.Errorf("MPS daemon pid %d is not running while its pod runs", st.PID)
	}
	mpsDaemon.dir, mpsDaemon.pid = filepath.Dir(pipe), st.PID
}

func afterMPS(t *testing.T) {
	if processAlive(mpsDaemon.pid) {
		t.Errorf("MPS daemon pid %d still running after its pod went", mpsDaemon.pid)
	}
	if _, err := os.Stat(mpsDaemon.dir); !os.IsNotExist(err) {
		t.Errorf("MPS daemon directory %s still there after its pod went (%v)", mpsDaemon.dir, err)
	}
}

// processAlive: the process exists and is not a zombie.
func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func checkMPSOnAMD(t *testing.T, o outcome) {
	msg := o.prepareFailed["mps-on-amd"]
	for _, want := range []string{"mps-on-amd-gpu", `request "gpu"`, "sharing.strategy (from claim)", "MPS is not supported on AMD GPUs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("kubelet event %q does not mention %q", msg, want)
		}
	}
	expectDevices(t, o.pods["mi300x-neighbour"], 1, func(d resourceapi.Device) bool { return str(d, "model") == "MI300X" })

	// The failure is on the claim too, where `kubectl describe
	// resourceclaim` shows it (status.devices[].conditions).
	ctx := context.Background()
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods(o.ns).Get(ctx, "mps-on-amd", metav1.GetOptions{})
		if err != nil || len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, fmt.Sprintf("pod claim statuses: %v", err)
		}
		c, err := client.ResourceV1().ResourceClaims(o.ns).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range c.Status.Devices {
			for _, k := range d.Conditions {
				if d.Driver == "gpu.tessera.dev" && k.Type == "Prepared" && k.Status == metav1.ConditionFalse &&
					k.Reason == "ConfigRejected" && strings.Contains(k.Message, "MPS is not supported on AMD GPUs") {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("claim device status %+v", c.Status.Devices)
	}); err != nil {
		t.Error(err)
	}
}

func checkRefused(t *testing.T, o outcome) {
	msg := o.rejected["ResourceClaim too-many-threads"]
	for _, want := range []string{"denied the request", "spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage", "150", "must be between 1 and 100"} {
		if !strings.Contains(msg, want) {
			t.Errorf("API server's refusal %q does not mention %q", msg, want)
		}
	}
}
