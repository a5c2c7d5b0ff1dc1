package simfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// write lays the tree out as a host boots: each function's directory with
// its identity files and driver_override "(null)", the bus's and each
// driver's links to it, its IOMMU group, and its default driver bound.
func (t *Tree) write() error {
	for _, d := range t.drivers() {
		if err := t.driverDir(d); err != nil {
			return err
		}
	}
	if err := t.file(filepath.Join("bus", "pci", "drivers_probe"), ""); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(t.root, "kernel", "iommu_groups"), 0o755); err != nil {
		return err
	}
	for _, f := range t.sorted() {
		if err := t.function(f); err != nil {
			return fmt.Errorf("function %s: %w", f.Address, err)
		}
	}
	return nil
}

// drivers are the loaded drivers: every function's default one, and
// vfio-pci where it is loaded.
func (t *Tree) drivers() []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, f := range t.sorted() {
		add(f.Driver)
	}
	if t.host.VFIO {
		add(VFIODriver)
	}
	return out
}

func (t *Tree) driverDir(d string) error {
	dir := filepath.Join("bus", "pci", "drivers", d)
	if err := t.file(filepath.Join(dir, "bind"), ""); err != nil {
		return err
	}
	return t.file(filepath.Join(dir, "unbind"), "")
}

func (t *Tree) function(f Function) error {
	dev := t.devicePath(f)
	files := map[string]string{
		"class":           fmt.Sprintf("0x%06x\n", f.Class),
		"vendor":          f.Vendor + "\n",
		"device":          f.Device + "\n",
		"numa_node":       strconv.Itoa(f.NUMANode) + "\n",
		"driver_override": "(null)\n",
	}
	for name, v := range files {
		if err := t.file(filepath.Join(dev, name), v); err != nil {
			return err
		}
	}
	if err := t.link(filepath.Join("bus", "pci", "devices", f.Address), dev); err != nil {
		return err
	}
	if t.host.IOMMU {
		g := groupDir(f.Group)
		if err := t.link(filepath.Join(g, "devices", f.Address), dev); err != nil {
			return err
		}
		if err := t.link(filepath.Join(dev, "iommu_group"), g); err != nil {
			return err
		}
	}
	if f.Driver != "" {
		return t.bindLinks(f, f.Driver)
	}
	return nil
}

// bindLinks makes f bound to d: its driver link and the driver's link to
// it.
func (t *Tree) bindLinks(f Function, d string) error {
	dev := t.devicePath(f)
	if err := t.link(filepath.Join(dev, "driver"), filepath.Join("bus", "pci", "drivers", d)); err != nil {
		return err
	}
	return t.link(filepath.Join("bus", "pci", "drivers", d, f.Address), dev)
}

// unbindLinks removes f's driver link and driver d's link to it.
func (t *Tree) unbindLinks(f Function, d string) error {
	for _, p := range []string{filepath.Join(t.devicePath(f), "driver"), filepath.Join("bus", "pci", "drivers", d, f.Address)} {
		if err := os.Remove(filepath.Join(t.root, p)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// file writes a regular file at rel (below the root).
func (t *Tree) file(rel, content string) error {
	p := filepath.Join(t.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

// link makes rel a relative symlink to target (both below the root), as
// sysfs's links are.
func (t *Tree) link(rel, target string) error {
	p := filepath.Join(t.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	r, err := filepath.Rel(filepath.Dir(p), filepath.Join(t.root, target))
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Symlink(r, p)
}
