// Package memlimit holds a GPU share to its memory in the kernel: a hard
// limit, for that GPU only, on the cgroup of the container using the share,
// set when the runtime creates the container and before anything in it
// runs.
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
// A share bounds one container at a time on its node: the hook records
// which container holds each claim's device under a state directory and
// refuses a second live one, so two containers never get the share twice.
package memlimit
