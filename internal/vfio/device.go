package vfio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/pci"
)

// Function is one PCI function as sysfs shows it now.
type Function struct {
	// Address is the canonical DDDD:BB:DD.F.
	Address string
	// Class is the 24-bit class code (0x030200: a 3D controller; 0x060400:
	// a PCI-to-PCI bridge); -1 when sysfs did not say.
	Class int64
	// Vendor is the PCI vendor ID as sysfs writes it (0x10de); "" unknown.
	Vendor string
	// Driver is the bound driver; "" for none.
	Driver string
	// Override is driver_override; "" for none (the kernel shows "(null)").
	Override string
}

// Bridge reports whether f is a PCI-to-PCI bridge (a root or switch port),
// which may share a passed GPU's IOMMU group.
func (f Function) Bridge() bool { return f.Class >= 0 && f.Class>>8 == 0x0604 }

// Display reports whether f is a display controller (VGA, 3D, other): a
// GPU.
func (f Function) Display() bool { return f.Class >= 0 && f.Class>>16 == 0x03 }

// canonical validates addr as a PCI address and returns its sysfs form:
// an address names a directory below the root, so nothing else may reach
// a path.
func canonical(addr string) (string, error) {
	a, err := pci.Normalize(addr)
	if err != nil {
		return "", err
	}
	return a, nil
}

// Slot is an address's domain, bus and device: the functions of one card.
func Slot(addr string) string {
	if i := strings.LastIndexByte(addr, '.'); i > 0 {
		return addr[:i]
	}
	return addr
}

// ReadFunction reads the function at addr. A function sysfs does not
// list is an error; a class or vendor file it lacks is left unknown.
func ReadFunction(s Sysfs, addr string) (Function, error) {
	a, err := canonical(addr)
	if err != nil {
		return Function{}, err
	}
	f := Function{Address: a, Class: -1}
	if !exists(s, devicesDir+"/"+a) {
		return f, pathError(s, devicesDir+"/"+a, fs.ErrNotExist)
	}
	if c, err := read(s, devicePath(a, "class")); err == nil {
		if v, perr := strconv.ParseInt(c, 0, 64); perr == nil {
			f.Class = v
		}
	}
	if v, err := read(s, devicePath(a, "vendor")); err == nil {
		f.Vendor = strings.ToLower(v)
	}
	if f.Driver, err = DriverOf(s, a); err != nil {
		return f, err
	}
	if f.Override, err = overrideOf(s, a); err != nil {
		return f, err
	}
	return f, nil
}

// DriverOf is the driver bound to the function at addr; "" for none.
func DriverOf(s Sysfs, addr string) (string, error) {
	d, err := linkBase(s, devicePath(addr, "driver"))
	if err != nil {
		return "", pathError(s, devicePath(addr, "driver"), err)
	}
	return d, nil
}

// overrideOf is the function's driver_override; "" for none. A kernel
// without the attribute (before 3.16) has no override to read.
func overrideOf(s Sysfs, addr string) (string, error) {
	v, err := read(s, devicePath(addr, "driver_override"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", pathError(s, devicePath(addr, "driver_override"), err)
	}
	if v == "(null)" {
		return "", nil
	}
	return v, nil
}

// List reads every PCI function of the node, in address order.
func List(s Sysfs) ([]Function, error) {
	entries, err := os.ReadDir(filepath.Join(s.Root(), filepath.FromSlash(devicesDir)))
	if err != nil {
		return nil, pathError(s, devicesDir, err)
	}
	var out []Function
	for _, e := range entries {
		if _, err := pci.ParseBusID(e.Name()); err != nil {
			continue
		}
		f, err := ReadFunction(s, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i].Address, out[j].Address) })
	return out, nil
}

func less(a, b string) bool {
	x, errx := pci.ParseBusID(a)
	y, erry := pci.ParseBusID(b)
	if errx != nil || erry != nil {
		return a < b
	}
	return x.Less(y)
}

// describe names f for a message: its address, class and driver.
func describe(f Function) string {
	drv := f.Driver
	if drv == "" {
		drv = "no driver"
	}
	class := "class unknown"
	if f.Class >= 0 {
		class = fmt.Sprintf("class %#06x", f.Class)
	}
	return fmt.Sprintf("%s (%s, %s)", f.Address, class, drv)
}
