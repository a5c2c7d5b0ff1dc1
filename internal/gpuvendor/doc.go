// Package gpuvendor is what Tessera knows of each GPU maker, behind one
// interface: the device nodes of a whole GPU and of a partition, what every
// container of the vendor needs once (common nodes and environment), and
// what sharing can do on the vendor's GPUs. The CDI writer, the sharing
// resolver and the simulator ask a Vendor instead of naming vendors, so a
// new vendor is one package beside nvidia and amd, listed in vendors, plus
// its backend.
//
// The name is not "vendor": the go command reserves that directory name.
package gpuvendor
