// Package publish is the one path from a node's inventory to the
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
//  1. Whole GPUs before partitions (dynamic GPUs interleave: rule 6).
//  2. Whole GPUs by ascending capability (memory, then compute units), so a
//     claim any GPU satisfies takes the smallest one that fits and large GPUs
//     stay free for claims that need them; a GPU whose memory or compute
//     units are unknown comes after those whose are known (lessKnown).
//     Equal GPUs are ordered by NUMA node, then fabric island, then PCI bus
//     ID, so a multi-GPU claim fills one NUMA node and one island before it
//     spills into the next.
//  3. Partitions grouped by parent, parents in the order of rule 2, and
//     within a parent smallest profile first, then by placement.
//
// Devices are cut into slices of at most MaxDevicesPerSlice in that order; all
// slices form one pool named after the node. Dynamic GPUs interleave the
// two ends of that order (rule 6).
//
// # Dynamic partitioning
//
// With Options.Partitioning Dynamic a MIG GPU is a partitionable device
// (KEP-4815): a counter set named like the GPU (gpu-<n>) holds one counter
// per memory slice plus those of the vendor's other limits that can bind
// (see counterPlan: on an H100 only the one OFA). The whole GPU consumes
// every counter; every profile at every placement of the vendor's table is
// a device named as its partition would be, consuming the slices it covers
// and its share of the other limits, so the allocator can never hand out
// overlapping placements, nor a whole GPU next to a partition. Placements
// carry no uuid until carved (the partition does not exist yet); the driver
// carves at prepare. Counter sets live in their own slices after the device
// slices, at most MaxCounterSetsPerSlice each. A GPU whose MIG mode change
// needs a reset publishes by its current mode (whole GPU, or placements
// without the whole GPU).
//
// The order makes first fit pack (BenchmarkChurn, BenchmarkChurnOrders):
//
//  4. Dynamic placements come after everything else, grouped by parent, with
//     parents in the reverse of rule 2: whole-GPU claims fill from one end,
//     partitions from the other, so a GPU fills before the next opens and
//     untouched GPUs stay whole for as long as possible.
//
//  5. Within a parent, smallest profile first; within a profile, first the
//     placements that strand no memory slice (leave none that every
//     placement reaching it overlaps), then those that block the fewest
//     placements of larger profiles, then the highest start. On an H100
//     1g.10gb fills slices 5, 4, ... 0 and 6 last (a 1g.10gb at 6 strands
//     slice 7), and 3g.40gb takes slice 4 first, so 4g.40gb at 0 stays
//     possible.
//
//  6. On a node with dynamic GPUs, slice k holds the k-th dynamic GPU's
//     whole device in the order of rule 2, followed by the placements of
//     the k-th dynamic GPU in the order of rule 4 (layout.go); the whole
//     GPUs and partitions of other GPUs follow in slices of their own. A
//     whole-GPU claim meets a whole GPU first and a 1g.10gb claim a 1g.10gb
//     second, not after every whole GPU, and first fit still takes the
//     whole GPU of rule 2 and the placement of rules 4 and 5: whole claims
//     fill from one end, partitions from the other. Each GPU's
//     placements are in one slice, so carving or destroying a partition
//     changes one slice, and the resourceslice controller updates that one
//     object without a new pool generation.
//
//  7. Within that slice, by what the GPU holds now (occupancy.go): first
//     every free placement of the GPU's smallest profile, then the first
//     free placement of each other profile in the order of rule 5, then the
//     other free placements, then the placements the partitions that exist
//     leave no room for (and those partitions). A claim for one profile
//     gets the device rule 5 gives it; a claim for the smallest profile
//     (1g.10gb, CPX), which the scheduler may allocate several times on one
//     GPU before the agent republishes, scans no device of another profile
//     on the way, and a claim for a larger profile scans the smallest
//     profile's free placements and at most one device of each other
//     smaller profile. A claim matching several profiles takes the
//     smallest profile's placements first.
//
//  8. With Options.Window K, a dynamic GPU without partitions publishes its
//     placements only while it is open: K such GPUs are, the first in the
//     order of rule 4, and an open GPU stays open until a claim holds it
//     whole (window.go says why that is the only safe moment to close one).
//     Whole GPUs and GPUs with partitions are always published. An empty
//     8-GPU H100 node publishes 58 devices with K=2 instead of 208, and
//     first fit takes the device it took before, since the window is where
//     rule 4 puts the next partition.
//
// Under random MIG and whole-GPU claims arriving and leaving on one DGX H100
// at full offered load (BenchmarkChurn), first fit in this order places more
// claims than name order and fewer than a bound that may repack every
// running partition (figures in docs/performance.md); parent direction
// (rule 4) changes where whole GPUs stay free, not how well they pack.
// Rule 7 changes no choice of a one-profile claim (TestChurnOccupancyOrder).
// Orders that follow occupancy across GPUs gain little memory-slice-time
// served (BenchmarkChurnAdaptive; figures in docs/performance.md); the rest
// of the bound's lead is repacking, which MIG cannot do.
package publish
