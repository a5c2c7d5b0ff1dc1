// Package slices is the one path from a node's inventory to the
// ResourceSlices Tessera publishes (resourceslice.DriverResources for
// kubeletplugin.Helper.PublishResources, and the same objects for --dry-run).
//
// # Device names
//
// A whole GPU is "gpu-<n>", where n is the GPU's position on the node in PCI
// bus ID order (domain, bus, device, function), across vendors. Bus IDs are
// fixed by the slot a card sits in, so names survive restarts, driver reloads
// and reboots; they change only when cards are added, removed or moved, which
// changes the hardware the name stands for anyway. Minor numbers and
// enumeration order are not used: drivers may renumber them.
//
// A partition is "gpu-<n>-<kind>-<profile>-<start>": the parent's name, the
// partition kind (mig, xcp), the profile with '.' and '+' turned into '-',
// and the first memory slice of its placement, e.g. gpu-7-mig-1g-10gb-3. A
// MIG placement is unique on its GPU, so the name is too, and the same
// instance recreated at the same place gets the same name.
//
// # Order
//
// The scheduler's allocator is first-fit over slices in name order and
// devices in slice order, so order is allocation priority:
//
//  1. Whole GPUs before partitions.
//  2. Whole GPUs by ascending capability (memory, then compute units), so a
//     claim any GPU satisfies takes the smallest one that fits and large GPUs
//     stay free for claims that need them. Equal GPUs are ordered by NUMA
//     node, then fabric island, then PCI bus ID, so a multi-GPU claim fills
//     one NUMA node and one island before it spills into the next.
//  3. Partitions grouped by parent, parents in the order of rule 2, and
//     within a parent smallest profile first, then by placement.
//
// Devices are cut into slices of at most MaxDevicesPerSlice in that order; all
// slices form one pool named after the node.
package slices
