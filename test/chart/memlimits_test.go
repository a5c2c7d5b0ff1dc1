package chart

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestMemoryLimits: off by default (no init container, no hook in the
// agent's environment); on, an init container copies the hook out of the
// agent's image to the host directory the runtime runs it from, the agent
// sees that directory read-only at the same path and is told the hook's
// path, and, on a real backend, it keeps the hook's records at the host's
// state directory (a claim's unprepare releases what a container left).
func TestMemoryLimits(t *testing.T) {
	ds, c := daemonSet(t, render(t))
	if len(ds.Spec.Template.Spec.InitContainers) != 0 || env(c)["TESSERA_MEMORY_LIMIT_HOOK"] != "" {
		t.Fatalf("memoryLimits off by default, yet init containers %v, hook %q", ds.Spec.Template.Spec.InitContainers, env(c)["TESSERA_MEMORY_LIMIT_HOOK"])
	}
	for _, tc := range []struct {
		backend  string
		stateDir bool
	}{{"nvml", true}, {"amd", true}, {"sim", false}} {
		t.Run(tc.backend, func(t *testing.T) {
			ds, c := daemonSet(t, render(t, "backend="+tc.backend, "memoryLimits.enabled=true", "memoryLimits.hookDir=/opt/x/bin/"))
			spec := ds.Spec.Template.Spec
			if len(spec.InitContainers) != 1 {
				t.Fatalf("%d init containers, want the hook's installer", len(spec.InitContainers))
			}
			ic := spec.InitContainers[0]
			if ic.Image != c.Image || !slices.Equal(ic.Command, []string{"/usr/bin/tessera-cdi-hook", "install", "--dir=/opt/x/bin/"}) {
				t.Errorf("installer: image %s (agent's %s), command %v", ic.Image, c.Image, ic.Command)
			}
			if sc := ic.SecurityContext; sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("installer's securityContext %+v: want every capability dropped, a read-only root", sc)
			}
			if got := env(c)["TESSERA_MEMORY_LIMIT_HOOK"]; got != "/opt/x/bin/tessera-cdi-hook" {
				t.Errorf("TESSERA_MEMORY_LIMIT_HOOK = %q", got)
			}
			hostPaths := map[string]string{}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					hostPaths[v.Name] = v.HostPath.Path
				}
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = m
			}
			if m := mounts["memory-limit-hook"]; m.MountPath != hostPaths["memory-limit-hook"] || !m.ReadOnly {
				t.Errorf("agent mounts the hook directory %+v from host %s: want read-only at its host path", m, hostPaths["memory-limit-hook"])
			}
			m, ok := mounts["memory-limit-state"]
			if ok != tc.stateDir {
				t.Fatalf("state directory mounted %v, want %v", ok, tc.stateDir)
			}
			if ok && (m.MountPath != "/run/tessera/memory-limits" || hostPaths["memory-limit-state"] != m.MountPath || env(c)["TESSERA_MEMORY_LIMIT_STATE_DIR"] != m.MountPath) {
				t.Errorf("state directory: mount %+v, host %s, env %q", m, hostPaths["memory-limit-state"], env(c)["TESSERA_MEMORY_LIMIT_STATE_DIR"])
			}
		})
	}
}
