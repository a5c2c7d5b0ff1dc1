// Package inventory is Tessera's vendor-neutral model of a node's accelerators:
// GPUs, the partition profiles they support and the partitions that exist,
// and the links between GPUs. Backends (nvml, amd, sim) fill it in; every layer
// above a backend (topology, slices, claims, cdi) reads only this model.
package inventory
