// Package inspect is the logic behind kubectl-tessera: it reads the
// ResourceSlices Tessera publishes and the ResourceClaims allocated from
// them (from a cluster or from files) and turns them into the fleet views
// the plugin prints, without ever writing to the cluster.
//
// The files, one job each:
//
//   - snapshot.go: the objects a view is built from, and where they come from.
//   - load.go: reading a Snapshot from YAML or JSON files (--dry-run output).
//   - cluster.go: reading a Snapshot from a cluster (list only).
//   - attrs.go: reading the published attribute schema off a device.
//   - pool.go: a node's devices, indexed, and the parent of each partition.
//   - names.go: device names: a partition's GPU, numbers in numeric order.
//   - allocations.go: which claims hold which device.
//   - taints.go: device taints as the views show them.
//   - partitioning.go: the partitioning modes of a GPU.
//   - output.go: the -o formats, JSON and YAML output.
//   - inventory.go: the inventory view (types with json tags).
//   - inventory_build.go: building it from a Snapshot.
//   - inventory_print.go: printing it as a table, JSON or YAML.
//   - topo.go: the GPU-to-GPU link classification.
//   - topo_print.go: printing the matrix as nvidia-smi topo -m does.
//   - format.go: human-readable quantities and NUMA nodes.
//   - explain.go: why a claim fits where it does, node by node, with the
//     scheduler's allocator as the judge; explain_reasons.go the reasons
//     (selectors, in use, counters, taints, capacity, constraints),
//     explain_load.go its inputs (classes, pods, templates),
//     explain_print.go its output.
//   - doctor.go: the troubleshooting checks as pure functions over a
//     DoctorInput; doctor_gather.go reading that input from a cluster;
//     doctor_print.go the PASS/WARN/FAIL lines.
package inspect
