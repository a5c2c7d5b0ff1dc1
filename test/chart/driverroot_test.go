package chart

import (
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/internal/driverroot"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/daemonpods"
)

// TestDriverRootMount: the agent's DaemonSet mounts the chart's driver
// root read-only at /driver-root and passes both flags, for the host's
// root and the GPU Operator's; sim only with sim.driverRoot (and then not
// --mps-control, which the root's stand-in replaces); amd and an empty
// root mount nothing.
func TestDriverRootMount(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		root string // "" none
	}{
		{name: "host", root: "/"},
		{name: "gpu operator", sets: []string{"nvidiaDriverRoot=/run/nvidia/driver"}, root: "/run/nvidia/driver"},
		{name: "nvml gpu operator", sets: []string{"backend=nvml", "nvidiaDriverRoot=/run/nvidia/driver"}, root: "/run/nvidia/driver"},
		{name: "nvml none", sets: []string{"backend=nvml", "nvidiaDriverRoot="}},
		{name: "amd", sets: []string{"backend=amd", "nvidiaDriverRoot=/run/nvidia/driver"}},
		{name: "sim without", sets: []string{"backend=sim"}},
		{name: "sim with", sets: []string{"backend=sim", "sim.driverRoot=/var/lib/tessera/sim-driver"}, root: "/var/lib/tessera/sim-driver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, c := daemonSet(t, render(t, tc.sets...))
			e := env(c)
			var vols []corev1.Volume
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.Name == "driver-root" {
					vols = append(vols, v)
				}
			}
			var mounts []corev1.VolumeMount
			for _, m := range c.VolumeMounts {
				if m.Name == "driver-root" {
					mounts = append(mounts, m)
				}
			}
			if tc.root == "" {
				if len(vols)+len(mounts) > 0 || e["TESSERA_NVIDIA_DRIVER_ROOT"] != "" || e["TESSERA_NVIDIA_DRIVER_ROOT_MOUNT"] != "" {
					t.Errorf("no driver root wanted; volumes %+v, mounts %+v, env %q %q", vols, mounts, e["TESSERA_NVIDIA_DRIVER_ROOT"], e["TESSERA_NVIDIA_DRIVER_ROOT_MOUNT"])
				}
				return
			}
			dirType := corev1.HostPathDirectory
			wantVol := []corev1.Volume{{Name: "driver-root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: tc.root, Type: &dirType}}}}
			if !reflect.DeepEqual(vols, wantVol) {
				t.Errorf("volumes %+v, want %+v", vols, wantVol)
			}
			prop := corev1.MountPropagationHostToContainer
			wantMount := []corev1.VolumeMount{{Name: "driver-root", MountPath: "/driver-root", ReadOnly: true, MountPropagation: &prop}}
			if !reflect.DeepEqual(mounts, wantMount) {
				t.Errorf("mounts %+v, want %+v", mounts, wantMount)
			}
			if e["TESSERA_NVIDIA_DRIVER_ROOT"] != tc.root || e["TESSERA_NVIDIA_DRIVER_ROOT_MOUNT"] != "/driver-root" {
				t.Errorf("TESSERA_NVIDIA_DRIVER_ROOT=%q, TESSERA_NVIDIA_DRIVER_ROOT_MOUNT=%q; want %q, /driver-root", e["TESSERA_NVIDIA_DRIVER_ROOT"], e["TESSERA_NVIDIA_DRIVER_ROOT_MOUNT"], tc.root)
			}
			if v, ok := e["TESSERA_MPS_CONTROL"]; ok {
				t.Errorf("TESSERA_MPS_CONTROL=%q beside a driver root: the agent takes the root's", v)
			}
			for _, f := range []string{"nvidia-driver-root", "nvidia-driver-root-mount"} {
				if !agentFlags[f] {
					t.Errorf("--%s is no agent flag", f)
				}
			}
		})
	}
	for _, bad := range []string{"nvidiaDriverRoot=run/nvidia/driver", "nvidiaDriverRoot=/run/nvidia/driver/"} {
		if _, err := chart(t).Render(ns, bad); err == nil || !strings.Contains(err.Error(), "clean absolute path") {
			t.Errorf("%s: %v; want the render refused", bad, err)
		}
	}
}

// TestMPSDaemonPolicyDriverRoot: for both roots, the policy admits the
// launcher's pod with the control program in each of the directories the
// agent searches (internal/driverroot's lists: the chart's copy must
// agree) and with each library directory as LD_LIBRARY_PATH; the hostile
// variants, the driver root's included, are TestMPSDaemonPolicy's.
func TestMPSDaemonPolicyDriverRoot(t *testing.T) {
	const agent = "system:serviceaccount:" + ns + ":tessera"
	const node = "gpu-1"
	for _, sets := range [][]string{nil, {"nvidiaDriverRoot=/run/nvidia/driver"}, {"backend=nvml", "nvidiaDriverRoot=/run/nvidia/driver", "mps.daemonPod.privileged=false"}} {
		t.Run(strings.Join(append([]string{"defaults"}, sets...), ","), func(t *testing.T) {
			objs := render(t, sets...)
			p := compilePolicy(t, one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-mps-daemons"))
			_, c := daemonSet(t, objs)
			e := env(c)
			good, err := daemonpods.Of(e, ns, node, "/var/run/tessera/mps", false)
			if err != nil {
				t.Fatal(err)
			}
			mount := e["TESSERA_NVIDIA_DRIVER_ROOT_MOUNT"]
			for _, dir := range driverroot.BinaryDirs {
				pod := good.DeepCopy()
				pod.Spec.Containers[0].Command[0] = daemonpods.ControlIn(mount, dir)
				if msg := p.admit(t, agent, node, "CREATE", pod, nil); msg != "" {
					t.Errorf("control program in %s denied: %s", dir, msg)
				}
			}
			for _, dir := range driverroot.LibraryDirs {
				pod := good.DeepCopy()
				for i := range pod.Spec.Containers[0].Env {
					if pod.Spec.Containers[0].Env[i].Name == mps.EnvLibraryPath {
						pod.Spec.Containers[0].Env[i].Value = daemonpods.LibraryPathIn(mount, dir)
					}
				}
				if msg := p.admit(t, agent, node, "CREATE", pod, nil); msg != "" {
					t.Errorf("LD_LIBRARY_PATH %s denied: %s", dir, msg)
				}
			}
			// Without LD_LIBRARY_PATH (a daemon of the sim's stand-in).
			pod := good.DeepCopy()
			var kept []corev1.EnvVar
			for _, ev := range pod.Spec.Containers[0].Env {
				if ev.Name != mps.EnvLibraryPath {
					kept = append(kept, ev)
				}
			}
			if len(kept) == len(pod.Spec.Containers[0].Env) {
				t.Errorf("the launcher's nvml pod has no %s: %+v", mps.EnvLibraryPath, pod.Spec.Containers[0].Env)
			}
			pod.Spec.Containers[0].Env = kept
			if msg := p.admit(t, agent, node, "CREATE", pod, nil); msg != "" {
				t.Errorf("without LD_LIBRARY_PATH denied: %s", msg)
			}
		})
	}
}
