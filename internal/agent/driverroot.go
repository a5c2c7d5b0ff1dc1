package agent

import (
	"fmt"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/driverroot"
)

// driverRoot is --nvidia-driver-root and its mount; ok is false when the
// flag is empty (libnvidia-ml by the loader's search, the MPS control
// program by PATH or --mps-control).
func (c *Config) driverRoot() (driverroot.Root, bool, error) {
	if c.NvidiaDriverRoot == "" {
		return driverroot.Root{}, false, nil
	}
	r, err := driverroot.New(c.NvidiaDriverRoot, c.NvidiaDriverRootMount)
	if err != nil {
		return driverroot.Root{}, false, fmt.Errorf("--nvidia-driver-root: %w", err)
	}
	return r, true, nil
}

// nvmlLibrary is the libnvidia-ml the nvml backend loads and the
// directory the driver's libraries are in (the MPS daemons' library path):
// from the driver root when one is set, else "" (the loader's search).
func (c *Config) nvmlLibrary(logger klog.Logger) (path, dir string, err error) {
	r, ok, err := c.driverRoot()
	if err != nil || !ok {
		return "", "", err
	}
	path, dir, err = r.Library(driverroot.NVML)
	if err != nil {
		return "", "", err
	}
	logger.Info("Loading NVML from the driver root", "driverRoot", r.Host, "mount", r.Mount, "library", path)
	return path, dir, nil
}

// driverMPSControl is the MPS control program found in the driver root,
// with its leading arguments; nil when --mps-control is set or no driver
// root is (the caller's default then holds). Missing from a set root is an
// error naming the paths tried: the driver ships it, so its absence says
// the root is wrong, and the first MPS claim would otherwise fail long
// after start.
func (c *Config) driverMPSControl(logger klog.Logger) ([]string, error) {
	if c.MPSControl != "" {
		return nil, nil
	}
	r, ok, err := c.driverRoot()
	if err != nil || !ok {
		return nil, err
	}
	p, err := r.Binary(driverroot.MPSControl)
	if err != nil {
		return nil, err
	}
	logger.Info("Running the MPS control program of the driver root", "driverRoot", r.Host, "mount", r.Mount, "mpsControl", p)
	return []string{p}, nil
}

// driverRootMount is where the agent sees --nvidia-driver-root: the mount
// flag, else the root itself; "" without a root.
func (c *Config) driverRootMount() string {
	if c.NvidiaDriverRootMount != "" {
		return c.NvidiaDriverRootMount
	}
	return c.NvidiaDriverRoot
}
