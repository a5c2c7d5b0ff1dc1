// Package nccltopo writes the topology file NCCL and RCCL read from
// NCCL_TOPO_FILE: an XML description of exactly a claim's GPUs, their PCIe
// placement and their NVLink, NVSwitch or xGMI links, so that a collective
// library inside a container, where /sys is masked and device indices are
// remapped, builds its rings from the node's real fabric
// (docs/training.md).
//
// Build orders the GPUs into ranks (order.go), derives the figures the
// inventory does not carry (derive.go) and emits the XML (build.go,
// xml.go). Check (rules.go) holds the parser rules the file must obey; the
// tests run every file the package writes through it.
//
// The file states what the agent knows and leaves out what the library
// detects better in the container: CPU vendor and model (cpuid), the NUMA
// node's CPU mask, GPUDirect RDMA support, NICs. NCCL fills an attribute
// only when the file does not set it, so a value written here wins.
package nccltopo
