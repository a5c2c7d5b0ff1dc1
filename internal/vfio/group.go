package vfio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoIOMMU: the node has no IOMMU groups, so nothing can be passed.
var ErrNoIOMMU = errors.New("the node has no IOMMU groups (/sys/kernel/iommu_groups is empty): turn on VT-d or AMD-Vi in the firmware and boot with intel_iommu=on or amd_iommu=on")

// ErrNoVFIO: the vfio-pci driver is not loaded.
var ErrNoVFIO = errors.New("the vfio-pci driver is not loaded (/sys/bus/pci/drivers/vfio-pci is missing): modprobe vfio-pci on the node")

// Ready reports whether the node can pass a device at all: it has IOMMU
// groups and the vfio-pci driver. The error says what is missing.
func Ready(s Sysfs) error {
	entries, err := os.ReadDir(filepath.Join(s.Root(), filepath.FromSlash(groupsDir)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pathError(s, groupsDir, err)
	}
	if len(entries) == 0 {
		return ErrNoIOMMU
	}
	if !exists(s, driversDir+"/"+Driver) {
		return ErrNoVFIO
	}
	return nil
}

// GroupOf is the IOMMU group of the function at addr.
func GroupOf(s Sysfs, addr string) (int, error) {
	a, err := canonical(addr)
	if err != nil {
		return 0, err
	}
	if !exists(s, devicesDir+"/"+a) {
		return 0, pathError(s, devicesDir+"/"+a, fs.ErrNotExist)
	}
	base, err := linkBase(s, devicePath(a, "iommu_group"))
	if err != nil {
		return 0, pathError(s, devicePath(a, "iommu_group"), err)
	}
	if base == "" {
		return 0, fmt.Errorf("%s has no IOMMU group: the IOMMU is off or does not cover it", a)
	}
	g, err := strconv.Atoi(base)
	if err != nil || g < 0 {
		return 0, fmt.Errorf("%s: iommu_group links to %q, not a group number", a, base)
	}
	return g, nil
}

// Members reads the functions of IOMMU group g, in address order.
func Members(s Sysfs, g int) ([]Function, error) {
	dir := groupsDir + "/" + strconv.Itoa(g) + "/devices"
	entries, err := os.ReadDir(filepath.Join(s.Root(), filepath.FromSlash(dir)))
	if err != nil {
		return nil, pathError(s, dir, err)
	}
	var out []Function
	for _, e := range entries {
		f, err := ReadFunction(s, e.Name())
		if err != nil {
			return nil, fmt.Errorf("IOMMU group %d: %w", g, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Function) int {
		if less(a.Address, b.Address) {
			return -1
		}
		return 1
	})
	return out, nil
}

// Passage is what passing one GPU binds: its IOMMU group and the functions
// of its slot, the GPU first, each as it is now (its driver is what
// Restore gives it back to).
type Passage struct {
	Group     int
	Functions []Function
}

// Plan reads the IOMMU group of each GPU in gpus (addresses), passed
// together, and returns what passing each binds, in the order given. It
// refuses a group with a device that is neither a function of a GPU in
// gpus' slots nor a bridge (the package doc's rule), naming it.
func Plan(s Sysfs, gpus []string) ([]Passage, error) {
	if err := Ready(s); err != nil {
		return nil, err
	}
	slots := map[string]bool{}
	for _, g := range gpus {
		a, err := canonical(g)
		if err != nil {
			return nil, err
		}
		slots[Slot(a)] = true
	}
	out := make([]Passage, len(gpus))
	checked := map[int]bool{}
	for i, g := range gpus {
		a, _ := canonical(g)
		group, err := GroupOf(s, a)
		if err != nil {
			return nil, err
		}
		members, err := Members(s, group)
		if err != nil {
			return nil, err
		}
		p := Passage{Group: group}
		var gpu *Function
		for j, m := range members {
			switch {
			case m.Address == a:
				gpu = &members[j]
			case Slot(m.Address) == Slot(a):
				p.Functions = append(p.Functions, m)
			}
		}
		if gpu == nil {
			return nil, fmt.Errorf("%s: its IOMMU group %d does not list it", a, group)
		}
		p.Functions = append([]Function{*gpu}, p.Functions...)
		if !checked[group] {
			if err := complete(group, members, slots); err != nil {
				return nil, err
			}
			checked[group] = true
		}
		out[i] = p
	}
	return out, nil
}

// complete refuses group unless every member is a function of a slot in
// slots or a bridge.
func complete(group int, members []Function, slots map[string]bool) error {
	var stray []string
	for _, m := range members {
		if !slots[Slot(m.Address)] && !m.Bridge() {
			stray = append(stray, describe(m))
		}
	}
	if len(stray) == 0 {
		return nil
	}
	return fmt.Errorf("IOMMU group %d is incomplete: it also holds %s, which would have to be passed with it (a device of a group goes to one virtual machine or none); pass the GPUs of the group together in one claim, or move the card to a slot with a group of its own",
		group, strings.Join(stray, ", "))
}

// Passable returns the IOMMU group of each GPU of gpus (addresses) that
// some claim could pass: its group holds nothing but functions of gpus'
// slots and bridges (a group of two GPUs is passable, both together).
// A GPU whose group cannot be read or is incomplete is left out, with why
// in why (by address). Ready's error when the node can pass nothing.
func Passable(s Sysfs, gpus []string) (groups map[string]int, why map[string]error, err error) {
	if err := Ready(s); err != nil {
		return nil, nil, err
	}
	slots := map[string]bool{}
	for _, g := range gpus {
		if a, err := canonical(g); err == nil {
			slots[Slot(a)] = true
		}
	}
	groups, why = map[string]int{}, map[string]error{}
	for _, g := range gpus {
		a, err := canonical(g)
		if err != nil {
			why[g] = err
			continue
		}
		group, err := GroupOf(s, a)
		if err == nil {
			var members []Function
			if members, err = Members(s, group); err == nil {
				err = complete(group, members, slots)
			}
		}
		if err != nil {
			why[a] = err
			continue
		}
		groups[a] = group
	}
	return groups, why, nil
}
