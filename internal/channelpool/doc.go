// Package channelpool publishes the IMEX channels of a multi-node NVLink
// domain as devices a pod group can claim: one pool per domain, whose
// slices carry a node selector on the domain's node label
// (names.NodeLabelFabricDomain) instead of a node name.
//
// Why a pool of the domain, and not a device per node: a group's workers
// on several trays must all use the same channel, and no other group of
// the domain may use it, since the channel is IMEX's isolation boundary
// (a process imports memory exported on a channel only through that
// channel's device). Channels of one domain are therefore a domain-wide
// resource, and the scheduler's allocator is the one arbiter that already
// sees all of them: a group's workers share one ResourceClaim (a
// PodGroup's claim of the Workload API, or a claim each pod names), the
// allocator gives that claim one free channel device, and the allocation
// inherits the slice's node selector, so every worker lands on a tray of
// that domain. Two groups never get one channel: the allocator never
// gives one device to two claims. No CRD, no controller: the agents of the
// domain publish the pool, one at a time (publisher.go).
//
// Channel 0 is never published: a driver loaded with
// NVreg_CreateImexChannel0=1 makes channel0 for every process of the host,
// and NVIDIA's host-managed IMEX mode hands channel 0 to every job, so it
// isolates nothing.
package channelpool
