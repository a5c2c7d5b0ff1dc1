package daemonpods

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/mps/daemonpod"
)

// driverRootCases are the variants of good's driver root: with one (good's
// second volume), each way a stolen token could widen what it mounts of the
// host or run or load from it something other than the driver's; without
// one, the driver root added. dir is the daemon's directory.
func driverRootCases(good *corev1.Pod, dir string, privileged bool) []Case {
	pod := func(f func(*corev1.Pod)) *corev1.Pod {
		p := good.DeepCopy()
		f(p)
		return p
	}
	setLibraryPath := func(v string) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == mps.EnvLibraryPath })
			c.Env = append(c.Env, corev1.EnvVar{Name: mps.EnvLibraryPath, Value: v})
		})
	}
	if len(good.Spec.Volumes) < 2 {
		return []Case{
			{Name: "the host's root as a driver root the install has not", Pod: pod(func(p *corev1.Pod) {
				t := corev1.HostPathDirectory
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: daemonpod.DriverRootVolume,
					VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/", Type: &t}}})
				c := &p.Spec.Containers[0]
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: daemonpod.DriverRootVolume, MountPath: "/driver-root", ReadOnly: true})
			}), Field: "spec.volumes"},
			{Name: "a library path without a driver root", Pod: setLibraryPath(dir + "/pipe"), Field: "env"},
		}
	}
	vol := func(f func(*corev1.HostPathVolumeSource)) *corev1.Pod {
		return pod(func(p *corev1.Pod) { f(p.Spec.Volumes[1].HostPath) })
	}
	mount := func(f func(*corev1.VolumeMount)) *corev1.Pod {
		return pod(func(p *corev1.Pod) { f(&p.Spec.Containers[0].VolumeMounts[1]) })
	}
	at := good.Spec.Containers[0].VolumeMounts[1].MountPath
	cases := []Case{
		{Name: "the driver root writable", Pod: mount(func(m *corev1.VolumeMount) { m.ReadOnly = false }), Field: "readOnly"},
		{Name: "the kubelet's directory as the driver root", Pod: vol(func(h *corev1.HostPathVolumeSource) { h.Path = "/var/lib/kubelet" }), Field: "spec.volumes[1]"},
		{Name: "the driver root created if missing", Pod: vol(func(h *corev1.HostPathVolumeSource) {
			t := corev1.HostPathDirectoryOrCreate
			h.Type = &t
		}), Field: "spec.volumes[1]"},
		{Name: "a subPath into the driver root", Pod: mount(func(m *corev1.VolumeMount) { m.SubPath = "var/lib/kubelet" }), Field: "subPath"},
		{Name: "HostToContainer propagation of the driver root", Pod: mount(func(m *corev1.VolumeMount) {
			m.MountPropagation = ptr(corev1.MountPropagationHostToContainer)
		}), Field: "mountPropagation"},
		{Name: "the driver root mounted over the image's programs", Pod: mount(func(m *corev1.VolumeMount) { m.MountPath = "/usr/bin" }), Field: "volumeMounts[1]"},
		{Name: "the driver root's volume dropped", Pod: pod(func(p *corev1.Pod) {
			p.Spec.Volumes = p.Spec.Volumes[:1]
			p.Spec.Containers[0].VolumeMounts = p.Spec.Containers[0].VolumeMounts[:1]
		}), Field: "spec.volumes"},
		{Name: "a program a tenant dropped, reached through the driver root", Pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Command[0] = path.Join(at, dir, "pipe", "nvidia-cuda-mps-control")
		}), Field: "command"},
		{Name: "another program of the driver root", Pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Command = append([]string{path.Join(at, "usr/bin/sh"), "-c"}, p.Spec.Containers[0].Command...)
		}), Field: "command"},
		{Name: "libraries a tenant dropped, through the driver root", Pod: setLibraryPath(path.Join(at, dir, "pipe")), Field: "env"},
		{Name: "libraries of the host's /tmp", Pod: setLibraryPath(path.Join(at, "tmp")), Field: "env"},
	}
	if privileged {
		cases = append(cases, Case{Name: "Bidirectional propagation of the driver root", Pod: mount(func(m *corev1.VolumeMount) {
			m.MountPropagation = ptr(corev1.MountPropagationBidirectional)
		}), Field: "mountPropagation"})
	}
	return cases
}
