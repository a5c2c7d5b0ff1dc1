package localcluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// DriverRootControl is where a node's driver root holds the MPS stand-in,
// as a driver holds nvidia-cuda-mps-control (internal/driverroot's first
// program directory).
const DriverRootControl = "usr/bin/nvidia-cuda-mps-control"

// DriverRoot is a containerd node's driver root on the host: what the
// simulator's stand-ins need, laid out as an NVIDIA driver root (the
// chart's sim.driverRoot), so that the agent and its MPS daemon pods run
// the stand-in from the host, not the one in the sim image.
func (c *Config) DriverRoot(node string) string { return filepath.Join(c.NodeDir(node), "driver-root") }

// makeDriverRoot makes node's driver root: tessera-sim (beside the
// plugin binary, what the sim image holds) copied to DriverRootControl,
// under which name it is the stand-in. A copy, not a link: the root is
// mounted into containers, where a link to a host path names nothing.
func (c *Config) makeDriverRoot(node string) error {
	src := filepath.Join(filepath.Dir(c.PluginBin), "tessera-sim")
	dst := filepath.Join(c.DriverRoot(node), filepath.FromSlash(DriverRootControl))
	if err := copyExecutable(src, dst); err != nil {
		return fmt.Errorf("node %s: driver root: %w", node, err)
	}
	return nil
}

// RemoveDriverRootControl takes the stand-in out of node's driver root, as
// a driver root without the MPS programs: the node's agent then stops at
// start naming the paths it tried. RestoreDriverRootControl puts it back.
func (c *Config) RemoveDriverRootControl(node string) error {
	p := filepath.Join(c.DriverRoot(node), filepath.FromSlash(DriverRootControl))
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("node %s: remove %s: %w", node, p, err)
	}
	return nil
}

// RestoreDriverRootControl undoes RemoveDriverRootControl.
func (c *Config) RestoreDriverRootControl(node string) error { return c.makeDriverRoot(node) }

// copyExecutable copies src to dst (mode 0755), replacing dst atomically
// and making its directory.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("the stand-in: %w (make build puts tessera-sim beside the plugin)", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copy %s to %s: %w", src, tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return nil
}

// shareMount makes dir a shared mount point, bound onto itself, unless it
// is one already. The chart mounts a driver root into the agent with
// HostToContainer propagation (so that a driver container started later
// is seen), which the kubelet allows only from a shared or slave mount: a
// real node's / is shared (systemd), this machine's need not be. Down
// unmounts everything under the cluster's directory.
func shareMount(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if !slices.Contains(mps, dir) {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}
