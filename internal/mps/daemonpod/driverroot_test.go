package daemonpod

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPodDriverRoot: with a driver root the pod's second volume is the
// root's host path (type Directory, never created) and its container
// mounts it read-only at the agent's mount path, where the control
// program the agent found is; without one the pod is as before.
func TestPodDriverRoot(t *testing.T) {
	dir := testRoot + "/claim-1234-0"
	daemonDir := corev1.Volume{Name: volumeName, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr(corev1.HostPathDirectory)}}}
	driverVolume := func(host string) corev1.Volume {
		return corev1.Volume{Name: DriverRootVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host, Type: ptr(corev1.HostPathDirectory)}}}
	}
	for _, tc := range []struct {
		name, root, mount string
		wantVolumes       []corev1.Volume
		wantMounts        []corev1.VolumeMount
	}{
		{name: "none", wantVolumes: []corev1.Volume{daemonDir}, wantMounts: []corev1.VolumeMount{{Name: volumeName, MountPath: dir}}},
		{name: "host", root: "/", mount: "/driver-root",
			wantVolumes: []corev1.Volume{daemonDir, driverVolume("/")},
			wantMounts:  []corev1.VolumeMount{{Name: volumeName, MountPath: dir}, {Name: DriverRootVolume, MountPath: "/driver-root", ReadOnly: true}}},
		{name: "gpu operator", root: "/run/nvidia/driver", mount: "/driver-root",
			wantVolumes: []corev1.Volume{daemonDir, driverVolume("/run/nvidia/driver")},
			wantMounts:  []corev1.VolumeMount{{Name: volumeName, MountPath: dir}, {Name: DriverRootVolume, MountPath: "/driver-root", ReadOnly: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(t)
			c := testConfig(a)
			c.DriverRoot, c.DriverRootMount = tc.root, tc.mount
			launch := launchOf("claim-1234-0")
			launch.Argv = []string{"/driver-root/usr/bin/nvidia-cuda-mps-control", "-f"}
			h, err := newLauncher(t, c).Launch(testCtx(t), launch)
			if err != nil {
				t.Fatal(err)
			}
			pod := getPod(t, a, h)
			if !reflect.DeepEqual(pod.Spec.Volumes, tc.wantVolumes) {
				t.Errorf("volumes %+v, want %+v", pod.Spec.Volumes, tc.wantVolumes)
			}
			if got := pod.Spec.Containers[0].VolumeMounts; !reflect.DeepEqual(got, tc.wantMounts) {
				t.Errorf("volumeMounts %+v, want %+v", got, tc.wantMounts)
			}
			if got := pod.Spec.Containers[0].Command; !reflect.DeepEqual(got, launch.Argv) {
				t.Errorf("command %q, want %q", got, launch.Argv)
			}
		})
	}
}

func TestNewDriverRootBoth(t *testing.T) {
	for _, tc := range []struct{ root, mount string }{{"/", ""}, {"", "/driver-root"}} {
		c := testConfig(newAPI(t))
		c.DriverRoot, c.DriverRootMount = tc.root, tc.mount
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "want both or neither") {
			t.Errorf("New(root %q, mount %q) = %v; want an error", tc.root, tc.mount, err)
		}
	}
}
