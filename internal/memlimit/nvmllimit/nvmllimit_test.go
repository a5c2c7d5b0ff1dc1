//go:build cgo && linux

package nvmllimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// nvmlNode is go-nvml's mock with one GPU whose limits per cgroup are kept
// as the driver would.
type nvmlNode struct {
	limits map[string][2]uint64
	inits  int
	setErr nvml.Return
	lib    *mock.Interface
}

func newNVML() *nvmlNode {
	n := &nvmlNode{limits: map[string][2]uint64{}, setErr: nvml.SUCCESS}
	dev := &mock.Device{
		SetMemoryLimits_v1Func: func(ns string, soft, hard uint64) nvml.Return {
			if n.setErr != nvml.SUCCESS {
				return n.setErr
			}
			n.limits[ns] = [2]uint64{soft, hard}
			return nvml.SUCCESS
		},
		GetMemoryLimits_v1Func: func(ns string) (nvml.MemoryLimits_v1, nvml.Return) {
			l := n.limits[ns]
			return nvml.MemoryLimits_v1{NameSpace: ns, SoftLimit: l[0], HardLimit: l[1]}, nvml.SUCCESS
		},
	}
	n.lib = &mock.Interface{
		InitFunc:     func() nvml.Return { n.inits++; return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { n.inits--; return nvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			if uuid != "GPU-1" {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return dev, nvml.SUCCESS
		},
	}
	return n
}

// TestNVMLShare: on NVIDIA the limit goes through NVML on the cgroup
// directory of the container's pod (soft 0, hard the share), is kept when
// the container goes while the pod's cgroup is there, and is lifted (hard
// NVML_DEVICE_MEMORY_LIMIT_MAX) by the claim's release; a driver that
// refuses fails the container and leaves no record.
func TestNVMLShare(t *testing.T) {
	const cg = "/kubepods/pod1/c1"
	d := t.TempDir()
	root, proc := filepath.Join(d, "cgroup"), filepath.Join(d, "proc")
	for _, p := range []string{filepath.Join(root, cg), filepath.Join(proc, "9")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(proc, "9", "cgroup"), []byte("0::"+cg+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gpu := newNVML()
	env := memlimit.Env{Proc: proc, NVML: Setter{Lib: gpu.lib}}
	h := memlimit.Hook{Path: "/opt/tessera/bin/tessera-cdi-hook", CgroupRoot: root, StateDir: filepath.Join(d, "state")}
	l := memlimit.Limit{ClaimUID: "uid-1", Claim: "a/gpu", Device: "gpu-0", Mechanism: memlimit.NVML, Region: "nvidia/0000:83:00.0/vidmem", GPU: "GPU-1", Bytes: 7 << 30}
	state := func(id string, pid int) specs.State {
		return specs.State{ID: id, Pid: pid, Annotations: map[string]string{memlimit.PodUIDAnnotations[0]: "1"}}
	}
	records := func() []memlimit.Record {
		r, err := memlimit.Records(h.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	if err := memlimit.Apply(h, l, state("c1", 9), env); err != nil {
		t.Fatal(err)
	}
	ns := filepath.Join(root, "kubepods/pod1")
	if got := gpu.limits[ns]; got != [2]uint64{0, 7 << 30} {
		t.Errorf("NVML limits of %s = %v, want soft 0, hard 7GiB", ns, got)
	}
	if gpu.inits != 0 {
		t.Errorf("NVML left initialised %d times", gpu.inits)
	}
	if err := memlimit.Release(h, "c1", env); err != nil {
		t.Fatal(err)
	}
	if got := gpu.limits[ns]; got != [2]uint64{0, 7 << 30} {
		t.Errorf("NVML limits after the container's release = %v, want the pod's kept", got)
	}
	if err := memlimit.ReleaseClaim(h, "uid-1", env); err != nil {
		t.Fatal(err)
	}
	if got := gpu.limits[ns]; got != [2]uint64{0, limitMax} {
		t.Errorf("NVML limits after the claim's release = %v, want soft 0, no hard limit", got)
	}

	gpu.setErr = nvml.ERROR_NOT_SUPPORTED
	err := memlimit.Apply(h, l, state("c1", 9), env)
	if err == nil || !strings.Contains(err.Error(), "GPU-1") || !strings.Contains(err.Error(), "NOT_SUPPORTED") {
		t.Fatalf("a driver that refuses: %v, want the GPU and NVML's reason", err)
	}
	if recs := records(); len(recs) != 0 {
		t.Errorf("a refused limit left records %+v", recs)
	}
	l.GPU = "GPU-9"
	gpu.setErr = nvml.SUCCESS
	if err := memlimit.Apply(h, l, state("c1", 9), env); err == nil || !strings.Contains(err.Error(), "GPU-9") {
		t.Errorf("a GPU NVML does not have: %v", err)
	}
}
