package memlimit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// setter sets and lifts a limit on one cgroup (cg, below root).
type setter interface {
	set(root, cg string, l Limit) error
	lift(root, cg string, l Limit) error
}

// Env is what the hook reaches on its node: /proc of the runtime's PID
// namespace and, for the NVML mechanism, the NVIDIA library.
type Env struct {
	// Proc is the runtime's /proc ("/proc" when empty).
	Proc string
	// NVML returns the library (nvml.New() when nil; go-nvml's mock in
	// tests).
	NVML func() nvml.Interface
}

func (e Env) proc() string {
	if e.Proc == "" {
		return "/proc"
	}
	return e.Proc
}

func (e Env) setter(h Hook, m Mechanism) (setter, error) {
	switch {
	case h.Simulated && m == Dmem:
		return simulatedDmem{}, nil
	case h.Simulated:
		return nil, fmt.Errorf("the simulator's cgroup tree takes the dmem mechanism only, not %s", m)
	case m == Dmem:
		return dmem{}, nil
	case m == NVML:
		lib := e.NVML
		if lib == nil {
			lib = func() nvml.Interface { return nvml.New() }
		}
		return nvmlSetter{lib: lib()}, nil
	}
	return nil, fmt.Errorf("%q is not a memory limit mechanism", m)
}

// dmem writes the kernel's dmem files (amdgpu, xe).
type dmem struct{}

func (dmem) set(root, cg string, l Limit) error {
	if err := enableDmem(root, cg); err != nil {
		return err
	}
	return writeDmemMax(dir(root, cg), l.Region, strconv.FormatInt(l.Bytes, 10))
}

func (dmem) lift(root, cg string, l Limit) error {
	return writeDmemMax(dir(root, cg), l.Region, "max")
}

// simulatedDmem plays the kernel in the simulator's tree: the container's
// cgroup directory is made there, mirroring the host's path, with the
// dmem.max the kernel would show; lifting removes the directory, as the
// runtime removes a real cgroup with its container.
type simulatedDmem struct{}

func (simulatedDmem) set(root, cg string, l Limit) error {
	if _, err := os.Stat(filepath.Join(root, "dmem.capacity")); err != nil {
		return fmt.Errorf("the simulated node's cgroup root offers no dmem controller: %w", err)
	}
	d := dir(root, cg)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("simulated cgroup %s: %w", cg, err)
	}
	return simulatedDmemMax(d, l.Region, strconv.FormatInt(l.Bytes, 10))
}

func (simulatedDmem) lift(root, cg string, _ Limit) error {
	d := dir(root, cg)
	if filepath.Clean(d) == filepath.Clean(root) {
		return fmt.Errorf("simulated cgroup %q is the root", cg)
	}
	return os.RemoveAll(d)
}

// nvmlSetter sets a cgroup's limit through NVML: soft 0, hard the limit;
// lifting is soft 0 and hard NVML_DEVICE_MEMORY_LIMIT_MAX, as NVML
// documents. The limit is read back, so a driver that accepted the call
// but holds another value fails the container.
type nvmlSetter struct{ lib nvml.Interface }

// limitMax is NVML_DEVICE_MEMORY_LIMIT_MAX: no hard limit.
const limitMax = ^uint64(0)

func (n nvmlSetter) set(root, cg string, l Limit) error {
	return n.with(l, func(dev nvml.Device, ns string) error {
		if ret := dev.SetMemoryLimits_v1(ns, 0, uint64(l.Bytes)); ret != nvml.SUCCESS {
			return fmt.Errorf("nvmlDeviceSetMemoryLimits_v1(%s, soft 0, hard %d) on GPU %s: %s", ns, l.Bytes, l.GPU, nvml.ErrorString(ret))
		}
		got, ret := dev.GetMemoryLimits_v1(ns)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("nvmlDeviceGetMemoryLimits_v1(%s) on GPU %s: %s", ns, l.GPU, nvml.ErrorString(ret))
		}
		if got.HardLimit != uint64(l.Bytes) || got.SoftLimit != 0 {
			return fmt.Errorf("GPU %s holds cgroup %s at soft %d, hard %d bytes after setting soft 0, hard %d", l.GPU, ns, got.SoftLimit, got.HardLimit, l.Bytes)
		}
		return nil
	}, root, cg)
}

func (n nvmlSetter) lift(root, cg string, l Limit) error {
	return n.with(l, func(dev nvml.Device, ns string) error {
		if ret := dev.SetMemoryLimits_v1(ns, 0, limitMax); ret != nvml.SUCCESS {
			return fmt.Errorf("nvmlDeviceSetMemoryLimits_v1(%s, soft 0, no hard limit) on GPU %s: %s", ns, l.GPU, nvml.ErrorString(ret))
		}
		return nil
	}, root, cg)
}

func (n nvmlSetter) with(l Limit, f func(nvml.Device, string) error, root, cg string) (err error) {
	if ret := n.lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML init: %s", nvml.ErrorString(ret))
	}
	defer func() {
		if ret := n.lib.Shutdown(); ret != nvml.SUCCESS && err == nil {
			err = errors.New("NVML shutdown: " + nvml.ErrorString(ret))
		}
	}()
	dev, ret := n.lib.DeviceGetHandleByUUID(l.GPU)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: %s", l.GPU, nvml.ErrorString(ret))
	}
	// NVML takes the cgroup's full directory path.
	return f(dev, dir(root, cg))
}
