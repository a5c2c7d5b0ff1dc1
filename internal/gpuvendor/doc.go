// Package gpuvendor is what Tessera knows of each GPU maker, behind one
// interface: the device nodes of a whole GPU and of a partition, what every
// container of the vendor needs once (common nodes and environment), the
// variable that lists a container's GPUs in order, the node-wide CDI spec
// the vendor's own tools write (OwnSpec), how its collective library reads
// a topology file (Collective), and what it can share, partition, enforce
// or pass through (Capabilities). The CDI writer, the claims' NCCL file,
// the topology file builder, the sharing resolver, the publisher and the
// simulator ask a Vendor instead of naming vendors
// (internal/repofiles's TestVendorRulesInVendorPackages holds it), so a new
// vendor is one package beside nvidia and amd, listed in vendors, plus its
// backend.
//
// The name is not "vendor": the go command reserves that directory name.
package gpuvendor
