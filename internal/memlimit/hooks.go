package memlimit

import (
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// hookTimeout bounds a hook run (seconds): a limit is a few file writes or
// one NVML call, and a hung hook must fail the container, not hold it.
var hookTimeout = 10

// Hooks are the CDI hooks a container of a device limited to l gets:
// createRuntime sets the limit on the container's cgroup before its
// process starts, or fails its creation; poststop forgets it.
func (h Hook) Hooks(l Limit) []*cdispec.Hook {
	return []*cdispec.Hook{
		{HookName: cdiapi.CreateRuntimeHook, Path: h.Path, Args: h.LimitArgs(l), Timeout: &hookTimeout},
		{HookName: cdiapi.PoststopHook, Path: h.Path, Args: h.ReleaseArgs(), Timeout: &hookTimeout},
	}
}
