package simfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Write implements vfio.Sysfs: value written to the attribute at path
// (relative to the root, through symlinks as the kernel resolves them),
// with the kernel's effect and its errors (Documentation/ABI/testing/
// sysfs-bus-pci):
//
//   - <device>/driver_override: the driver that alone may bind the device
//     from now on; a value of only a newline clears it.
//   - bus/pci/drivers/<d>/bind: bind the device named to d, which must
//     match it (its driver_override, or its ID table where none is set):
//     ENODEV if not, EBUSY if it has a driver.
//   - bus/pci/drivers/<d>/unbind: unbind the device from d (ENODEV if d
//     does not hold it).
//   - bus/pci/drivers_probe: bind an unbound device to its
//     driver_override, else to its default driver; nothing if neither is
//     loaded, or it is bound.
//
// Any other path is EACCES, as a read-only attribute is.
func (t *Tree) Write(path, value string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rel, err := t.resolve(path)
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	if t.fault != nil {
		if err := t.fault(rel, value); err != nil {
			return &fs.PathError{Op: "write", Path: path, Err: err}
		}
	}
	err = t.act(rel, value)
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// act does what writing value to rel (resolved, slash-separated) does.
func (t *Tree) act(rel, value string) error {
	parts := strings.Split(rel, "/")
	arg := strings.TrimSpace(value)
	switch {
	case rel == "bus/pci/drivers_probe":
		return t.probe(arg)
	case len(parts) == 5 && parts[0] == "bus" && parts[2] == "drivers" && parts[4] == "bind":
		return t.bind(parts[3], arg)
	case len(parts) == 5 && parts[0] == "bus" && parts[2] == "drivers" && parts[4] == "unbind":
		return t.unbind(parts[3], arg)
	case parts[0] == "devices" && parts[len(parts)-1] == "driver_override":
		f, ok := t.fns[parts[len(parts)-2]]
		if !ok || t.devicePath(f) != filepath.FromSlash(strings.Join(parts[:len(parts)-1], "/")) {
			return syscall.ENOENT
		}
		content := "(null)\n"
		if arg != "" {
			content = arg + "\n"
		}
		return t.file(filepath.Join(t.devicePath(f), "driver_override"), content)
	}
	return syscall.EACCES
}

// resolve turns path into the attribute's real path below the root, its
// directories' symlinks followed (bus/pci/devices/<a>/driver/unbind is
// bus/pci/drivers/<d>/unbind).
func (t *Tree) resolve(path string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(path))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", syscall.EINVAL
	}
	root, err := filepath.EvalSymlinks(t.root)
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(t.root, filepath.Dir(clean)))
	if err != nil {
		return "", syscall.ENOENT
	}
	p := filepath.Join(dir, filepath.Base(clean))
	if _, err := os.Lstat(p); err != nil {
		return "", syscall.ENOENT
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", syscall.EINVAL
	}
	return filepath.ToSlash(rel), nil
}

// driver is f's bound driver; "" for none.
func (t *Tree) driver(addr string) (string, error) {
	f, ok := t.fns[addr]
	if !ok {
		return "", syscall.ENODEV
	}
	target, err := os.Readlink(filepath.Join(t.root, t.devicePath(f), "driver"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return filepath.Base(target), nil
}

func (t *Tree) override(f Function) (string, error) {
	b, err := os.ReadFile(filepath.Join(t.root, t.devicePath(f), "driver_override"))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if v == "(null)" {
		v = ""
	}
	return v, nil
}

func (t *Tree) loaded(d string) bool {
	_, err := os.Stat(filepath.Join(t.root, "bus", "pci", "drivers", d))
	return err == nil
}

// bind binds the function at addr to d.
func (t *Tree) bind(d, addr string) error {
	f, ok := t.fns[addr]
	if !ok {
		return syscall.ENODEV
	}
	cur, err := t.driver(addr)
	if err != nil {
		return err
	}
	if cur != "" {
		return syscall.EBUSY
	}
	ov, err := t.override(f)
	if err != nil {
		return err
	}
	if (ov != "" && ov != d) || (ov == "" && f.Driver != d) {
		return syscall.ENODEV
	}
	return t.attach(f, d)
}

// attach binds f to d and, for vfio-pci, makes its group's node appear.
func (t *Tree) attach(f Function, d string) error {
	if d == VFIODriver && t.host.IOMMU && t.nodes != nil {
		present, err := t.groupBound(f.Group)
		if err != nil {
			return err
		}
		if !present {
			if err := t.nodes(f.Group, true); err != nil {
				return err
			}
		}
	}
	if err := t.bindLinks(f, d); err != nil {
		return err
	}
	t.writes.Add(1)
	return nil
}

// unbind unbinds the function at addr from d.
func (t *Tree) unbind(d, addr string) error {
	f, ok := t.fns[addr]
	if !ok {
		return syscall.ENODEV
	}
	cur, err := t.driver(addr)
	if err != nil {
		return err
	}
	if cur != d {
		return syscall.ENODEV
	}
	if err := t.unbindLinks(f, d); err != nil {
		return err
	}
	t.writes.Add(1)
	if d == VFIODriver && t.host.IOMMU && t.nodes != nil {
		present, err := t.groupBound(f.Group)
		if err != nil {
			return err
		}
		if !present {
			return t.nodes(f.Group, false)
		}
	}
	return nil
}

// probe binds the function at addr to the driver that matches it, if it
// has none.
func (t *Tree) probe(addr string) error {
	f, ok := t.fns[addr]
	if !ok {
		return syscall.ENODEV
	}
	cur, err := t.driver(addr)
	if err != nil || cur != "" {
		return err
	}
	want, err := t.override(f)
	if err != nil {
		return err
	}
	if want == "" {
		want = f.Driver
	}
	if want == "" || !t.loaded(want) {
		return nil
	}
	return t.attach(f, want)
}

// groupBound reports whether a function of group g is on vfio-pci.
func (t *Tree) groupBound(g int) (bool, error) {
	for _, f := range t.fns {
		if f.Group != g {
			continue
		}
		d, err := t.driver(f.Address)
		if err != nil {
			return false, err
		}
		if d == VFIODriver {
			return true, nil
		}
	}
	return false, nil
}
