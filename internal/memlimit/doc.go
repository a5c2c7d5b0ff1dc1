// Package memlimit holds a GPU share to its memory in the kernel: a hard
// limit, for that GPU only, on the cgroup of the pod using the share, set
// when the runtime creates the pod's first container of the claim and
// before anything in it runs. The pod's cgroup, not the container's: a
// sibling container that does not name the claim, handed an open device
// by one that does, allocates under the pod's limit too.
//
// The limit is set by Tessera's CDI hook (cmd/tessera-cdi-hook), which the
// claim's CDI spec names as a createRuntime hook of the share's device.
// The runtime runs it after it has made the container's cgroup and before
// the container's process starts; a hook that fails fails the container's
// creation. So a container of a share the node advertised as kernel-isolated
// never starts without its limit, whatever state the agent is in (it may
// be restarting): the mechanism fails closed (docs/design.md says why a CDI
// hook and not an NRI plugin).
//
// Two mechanisms set the limit: Dmem writes the GPU's region line into the
// cgroup's dmem.max (amdgpu and xe VRAM regions; the simulator's cgroup
// tree), NVML calls nvmlDeviceSetMemoryLimits_v1 on the cgroup (NVIDIA r615+,
// which says not to write its dmem files directly). The soft limit is left
// at 0: runc runs poststop hooks only after it has removed the cgroup, too
// late to clear a reservation, and a limit on the cgroup goes with it.
//
// A share bounds one pod at a time on its node: the hook records which pod
// holds each claim's device under a state directory, with the pod's
// containers that got it, and refuses a container of a second pod while
// the first lives, so two pods never get the share twice. An MPS claim's
// pinned memory limit is each container's, as MPS applies it per client:
// each container gets it on its own cgroup, and the pod the sum.
package memlimit
