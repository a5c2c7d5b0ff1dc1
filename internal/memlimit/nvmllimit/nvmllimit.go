//go:build cgo && linux

package nvmllimit

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// Setter sets a cgroup's limit through NVML: soft 0, hard the limit;
// lifting is soft 0 and hard NVML_DEVICE_MEMORY_LIMIT_MAX, as NVML
// documents. The limit is read back, so a driver that accepted the call
// but holds another value fails the container.
type Setter struct{ Lib nvml.Interface }

// New is the Setter of the node's NVIDIA library, which is loaded only
// when a limit is set or lifted.
func New() memlimit.Setter { return Setter{Lib: nvml.New()} }

var _ memlimit.Setter = Setter{}

// limitMax is NVML_DEVICE_MEMORY_LIMIT_MAX: no hard limit.
const limitMax = ^uint64(0)

func (n Setter) Set(root, cg string, l memlimit.Limit) error {
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

func (n Setter) Lift(root, cg string, l memlimit.Limit) error {
	return n.with(l, func(dev nvml.Device, ns string) error {
		if ret := dev.SetMemoryLimits_v1(ns, 0, limitMax); ret != nvml.SUCCESS {
			return fmt.Errorf("nvmlDeviceSetMemoryLimits_v1(%s, soft 0, no hard limit) on GPU %s: %s", ns, l.GPU, nvml.ErrorString(ret))
		}
		return nil
	}, root, cg)
}

func (n Setter) with(l memlimit.Limit, f func(nvml.Device, string) error, root, cg string) (err error) {
	if ret := n.Lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML init: %s", nvml.ErrorString(ret))
	}
	defer func() {
		if ret := n.Lib.Shutdown(); ret != nvml.SUCCESS && err == nil {
			err = errors.New("NVML shutdown: " + nvml.ErrorString(ret))
		}
	}()
	dev, ret := n.Lib.DeviceGetHandleByUUID(l.GPU)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: %s", l.GPU, nvml.ErrorString(ret))
	}
	// NVML takes the cgroup's full directory path.
	return f(dev, filepath.Join(root, filepath.FromSlash(cg)))
}
