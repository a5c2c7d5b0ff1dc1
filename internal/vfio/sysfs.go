package vfio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Sysfs is a node's /sys. It is read as files and symlinks below Root;
// what the kernel acts on (driver_override, bind, unbind, drivers_probe)
// goes through Write, which on a host is write(2) to the attribute and in
// the simulator a model of what the kernel does then.
type Sysfs interface {
	// Root is the directory that holds bus/, devices/ and kernel/.
	Root() string
	// Write writes value to the attribute at path, relative to Root.
	Write(path, value string) error
}

// HostSysfs is the host's sysfs mounted at a directory: /sys, or
// <--sysfs-root>/sys.
type HostSysfs string

// Root implements Sysfs.
func (h HostSysfs) Root() string { return string(h) }

// Write implements Sysfs: one write(2) of value to the attribute, opened
// without O_CREAT, so a missing attribute (a driver not loaded) is an
// error rather than a file created where the kernel has none.
func (h HostSysfs) Write(path, value string) error {
	f, err := os.OpenFile(filepath.Join(string(h), filepath.FromSlash(path)), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Sysfs paths, relative to the root (the kernel's ABI:
// Documentation/ABI/testing/sysfs-bus-pci, sysfs-kernel-iommu_groups).
const (
	devicesDir   = "bus/pci/devices"
	driversDir   = "bus/pci/drivers"
	driversProbe = "bus/pci/drivers_probe"
	groupsDir    = "kernel/iommu_groups"
)

// Driver is the driver this package binds devices to.
const Driver = "vfio-pci"

func devicePath(addr, attr string) string { return devicesDir + "/" + addr + "/" + attr }

// read returns the trimmed content of the attribute at path.
func read(s Sysfs, path string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.Root(), filepath.FromSlash(path)))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// linkBase is the last element of the symlink at path; "" when there is
// no link there.
func linkBase(s Sysfs, path string) (string, error) {
	target, err := os.Readlink(filepath.Join(s.Root(), filepath.FromSlash(path)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return filepath.Base(target), nil
}

// exists reports whether path exists below the root.
func exists(s Sysfs, path string) bool {
	_, err := os.Stat(filepath.Join(s.Root(), filepath.FromSlash(path)))
	return err == nil
}

// pathError names the sysfs file a failure was about, as the node has it.
func pathError(s Sysfs, path string, err error) error {
	return fmt.Errorf("%s: %w", filepath.Join(s.Root(), filepath.FromSlash(path)), err)
}
