package vfio

import (
	"fmt"
	"strconv"
)

// Step is a point between two of Bind's or Restore's sysfs writes; the
// caller's after hook runs at each (crash tests stop there).
type Step string

const (
	// StepOverridden: driver_override says vfio-pci, the device is still
	// on its driver.
	StepOverridden Step = "vfio-overridden"
	// StepUnbound: the device left its host driver and is on none; only
	// vfio-pci may take it (driver_override).
	StepUnbound Step = "vfio-host-unbound"
	// StepBound: the device is on vfio-pci.
	StepBound Step = "vfio-bound"
	// StepCleared: driver_override is cleared, the device still on vfio-pci.
	StepCleared Step = "vfio-override-cleared"
	// StepReleased: the device left vfio-pci and is on no driver.
	StepReleased Step = "vfio-released"
	// StepRestored: the kernel probed the device again and its default
	// driver took it.
	StepRestored Step = "vfio-restored"
)

// AnyDriver, as Restore's want, takes whatever driver the kernel's probe
// gives the function (the start-up sweep, which has no record of it).
const AnyDriver = "*"

// GroupNode is the device node of IOMMU group g, relative to /dev: the
// one a virtual machine opens.
func GroupNode(g int) string { return "vfio/" + strconv.Itoa(g) }

// ContainerNode is the VFIO container node, relative to /dev: every
// process using a group opens it too (KubeVirt requires it).
const ContainerNode = "vfio/vfio"

// Bind moves the function at addr to vfio-pci: driver_override first, so
// that nothing but vfio-pci can take it once it leaves its driver, then
// unbind, then bind. A function on vfio-pci already is left there; one on
// no driver (a Bind cut short between unbind and bind) is bound. after,
// if set, runs after each write; its error stops Bind there.
func Bind(s Sysfs, addr string, after func(Step) error) error {
	a, err := canonical(addr)
	if err != nil {
		return err
	}
	step := func(st Step) error {
		if after == nil {
			return nil
		}
		return after(st)
	}
	if err := s.Write(devicePath(a, "driver_override"), Driver); err != nil {
		return fmt.Errorf("%s: set driver_override to %s: %w", a, Driver, err)
	}
	if err := step(StepOverridden); err != nil {
		return err
	}
	drv, err := DriverOf(s, a)
	if err != nil {
		return err
	}
	if drv == Driver {
		return nil
	}
	if drv != "" {
		if err := s.Write(driversDir+"/"+drv+"/unbind", a); err != nil {
			return fmt.Errorf("%s: unbind from %s: %w", a, drv, err)
		}
		if err := step(StepUnbound); err != nil {
			return err
		}
	}
	if err := s.Write(driversDir+"/"+Driver+"/bind", a); err != nil {
		return fmt.Errorf("%s: bind to %s: %w", a, Driver, err)
	}
	if now, err := DriverOf(s, a); err != nil {
		return err
	} else if now != Driver {
		return fmt.Errorf("%s: bound to %s, but sysfs shows %s", a, Driver, nameDriver(now))
	}
	return step(StepBound)
}

// Restore gives the function at addr back to its default driver: clear
// driver_override, unbind from vfio-pci, and have the kernel probe it.
// want is the driver it must come back on ("" for none: it had none). A
// function on another driver than vfio-pci and want is left there and
// reported. after, if set, runs after each write.
func Restore(s Sysfs, addr, want string, after func(Step) error) error {
	a, err := canonical(addr)
	if err != nil {
		return err
	}
	step := func(st Step) error {
		if after == nil {
			return nil
		}
		return after(st)
	}
	// "\n" alone clears it: the kernel strips the newline and an empty
	// override is none.
	if err := s.Write(devicePath(a, "driver_override"), "\n"); err != nil {
		return fmt.Errorf("%s: clear driver_override: %w", a, err)
	}
	if err := step(StepCleared); err != nil {
		return err
	}
	drv, err := DriverOf(s, a)
	if err != nil {
		return err
	}
	if drv == Driver {
		if err := s.Write(driversDir+"/"+Driver+"/unbind", a); err != nil {
			return fmt.Errorf("%s: unbind from %s: %w", a, Driver, err)
		}
		if err := step(StepReleased); err != nil {
			return err
		}
		drv = ""
	}
	if drv == "" && want != "" {
		// An interrupted Bind (override set, no driver) comes here too.
		if err := s.Write(driversProbe, a); err != nil {
			return fmt.Errorf("%s: probe for its driver: %w", a, err)
		}
		if drv, err = DriverOf(s, a); err != nil {
			return err
		}
		if err := step(StepRestored); err != nil {
			return err
		}
	}
	if drv != want && want != AnyDriver {
		return fmt.Errorf("%s: back on %s, want %s (was it loaded again, or given to another driver?)", a, nameDriver(drv), nameDriver(want))
	}
	return nil
}

func nameDriver(d string) string {
	if d == "" {
		return "no driver"
	}
	return d
}
