// Package vfio hands whole PCI devices to virtual machines: it reads a
// node's IOMMU groups and PCI drivers from sysfs, decides whether a GPU's
// group can be passed, and moves a device between its host driver and
// vfio-pci through driver_override. It knows no vendor: which driver a
// GPU comes from and goes back to is the caller's (gpuvendor), and every
// path is read below a Sysfs's root, so a fixture tree or the simulator's
// (internal/vfio/simfs) stands in for a host's /sys.
//
// # The group rule
//
// VFIO gives a virtual machine an IOMMU group, never a single device: the
// group's node /dev/vfio/<group> opens only when every device in it is
// held by a VFIO driver or is a PCI bridge. So a GPU can be passed only
// if every other device of its group is either
//
//   - a function of a slot being passed (the GPU's own audio or USB
//     function, or a function of another GPU the same claim passes),
//     which is bound to vfio-pci with it and given back with it, or
//   - a PCI-to-PCI bridge (class 0x0604, a root or switch port), which
//     stays on its driver.
//
// Anything else (a NIC or an NVMe drive behind the same switch without
// ACS, another GPU the claim does not pass) makes the group incomplete:
// the GPU is refused, naming the device in the way (Plan).
//
// # Moving a device (Bind, Restore)
//
// Bind writes vfio-pci to the device's driver_override, unbinds it from
// its driver and binds it to vfio-pci; Restore clears driver_override,
// unbinds it from vfio-pci and asks the kernel to probe it again, so its
// default driver takes it, and checks that it is the one it left. Each
// step is one sysfs write that the next call recognises as done, so either
// can run again after a crash at any point and finish the job: a device
// left between unbind and bind (no driver, driver_override set) is bound
// by a Bind and given back by a Restore. The kernel forgets
// driver_override at a reboot, when every device comes up on its default
// driver again: nothing of a passthrough survives it.
package vfio
