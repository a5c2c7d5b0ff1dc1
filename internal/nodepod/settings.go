package nodepod

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Settings are what every daemon pod of the agent shares, whatever it
// runs: where, as whom, from which image, with what privilege, and the
// driver root it mounts.
type Settings struct {
	// Namespace holds the pods: the agent's own, where the chart grants
	// it pods and nowhere else.
	Namespace string
	// NodeName is the node the pods run on (spec.nodeName: no scheduler).
	NodeName string
	// Image is the agent's own image, which holds the daemon programs at
	// the paths the agent knows (the sim image: the stand-ins).
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// ServiceAccount is the pods' own, with no rights; its token is not
	// mounted either.
	ServiceAccount string
	// Privileged runs the daemons privileged, for the GPU device nodes
	// (nvml); the sim's stand-ins need none.
	Privileged        bool
	PriorityClassName string
	// DriverRoot is the NVIDIA driver's root on the host
	// (--nvidia-driver-root) and DriverRootMount where the agent sees it:
	// each pod mounts the one read-only at the other (a hostPath of type
	// Directory), so that the program the agent found there and the
	// driver's libraries are at the same paths in the pod. Empty: no such
	// mount (the program is the image's).
	DriverRoot      string
	DriverRootMount string
}

// DriverRootVolume is the name of the driver root's volume, a daemon pod's
// last.
const DriverRootVolume = "driver-root"

// Check names what is missing or inconsistent, and fills the defaults.
func (s *Settings) Check() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"namespace", s.Namespace}, {"node name", s.NodeName}, {"image", s.Image}, {"service account", s.ServiceAccount},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no %s", strings.Join(missing, ", "))
	}
	if (s.DriverRoot == "") != (s.DriverRootMount == "") {
		return fmt.Errorf("driver root %q mounted at %q: want both or neither", s.DriverRoot, s.DriverRootMount)
	}
	if s.ImagePullPolicy == "" {
		s.ImagePullPolicy = corev1.PullIfNotPresent
	}
	return nil
}

// DriverRootMounts are the driver root's volume and its mount, none
// without a root: the driver's, read-only, never created (a missing root
// is the node's fault, which the pod's events then name).
func (s *Settings) DriverRootMounts() ([]corev1.Volume, []corev1.VolumeMount) {
	if s.DriverRoot == "" {
		return nil, nil
	}
	dirType := corev1.HostPathDirectory
	return []corev1.Volume{{
			Name:         DriverRootVolume,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: s.DriverRoot, Type: &dirType}},
		}},
		[]corev1.VolumeMount{{Name: DriverRootVolume, MountPath: s.DriverRootMount, ReadOnly: true}}
}

// SecurityContext is a daemon container's: privileged where the daemon
// opens the GPU device nodes (nvml: the device cgroup lets only a
// privileged container at them); otherwise root without capabilities,
// which owns the directories the agent (root) made and can do nothing
// else.
func (s *Settings) SecurityContext() *corev1.SecurityContext {
	yes, no, root := true, false, int64(0)
	if s.Privileged {
		return &corev1.SecurityContext{Privileged: &yes}
	}
	return &corev1.SecurityContext{
		RunAsUser:                &root,
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   &yes,
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
