// Package amdsysfs is Tessera's AMD backend. It reads what the amdgpu and KFD
// kernel drivers publish in sysfs (no AMD library is needed, or available
// from the Go module proxy): the KFD topology under
// /sys/class/kfd/kfd/topology for GPUs, compute partitions and xGMI links,
// and the PCI device directories behind them for partition modes, NUMA
// affinity, PCIe roots and DRM minors.
//
// WatchHealth (health.go) polls the same tree: each GPU's PCI device
// directory (gone: lost) and amdgpu's RAS error counters below it (ras.go;
// counts, and the resets they show).
//
// Every path is read below Options.SysfsRoot, so a captured tree (see
// test/fixtures/amd) can stand in for a real host.
package amdsysfs
