// Package inspect is what the kubectl-tessera commands share: it reads the
// ResourceSlices Tessera publishes and the ResourceClaims allocated from
// them (from a cluster or from files), without ever writing to the cluster,
// and gives the views of them every command builds on. Each command is a
// package below: inventory, topo, explain, doctor; inspecttest holds what
// their tests share.
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
//   - format.go: human-readable quantities and NUMA nodes.
package inspect
