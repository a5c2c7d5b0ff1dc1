// Package driverroot finds the NVIDIA driver's files under a driver root:
// the host's / where the driver is installed on the node, or
// /run/nvidia/driver under the GPU Operator, mounted into the agent's
// container (the chart mounts it read-only at /driver-root).
//
// The agent loads libnvidia-ml.so.1 from it and runs the MPS control
// program found in it, in its own container and in the MPS daemon pods,
// which mount the same host directory at the same path. The places looked
// at are a fixed list (LibraryDirs, BinaryDirs), so that the chart's
// admission policy can pin the daemon pods' command to exactly those paths:
// a path chosen freely below a root of / could name a file a tenant wrote.
package driverroot
