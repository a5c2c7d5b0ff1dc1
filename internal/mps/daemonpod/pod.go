package daemonpod

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tessera-gpu/tessera/internal/mps"
)

// Labels and annotations of a daemon's pod. The chart's admission policy
// allows the agent to create and delete only pods labelled AppName.
const (
	LabelName      = "app.kubernetes.io/name"
	AppName        = "tessera-mps-daemon"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "tessera"
	// LabelDaemon is the daemon's id, where it is a valid label value
	// (for kubectl get -l); AnnotationID always holds it.
	LabelDaemon  = "gpu.tessera.dev/mps-daemon"
	AnnotationID = "gpu.tessera.dev/mps-daemon-id"
	// AnnotationDir is the daemon's directory, <root>/<id>, by which Find
	// keeps only the daemons of one root.
	AnnotationDir = "gpu.tessera.dev/mps-dir"
)

// ContainerName is the daemon's one container.
const ContainerName = "mps-control"

const (
	namePrefix = "tessera-mps-"
	volumeName = "mps-dir"
	// DriverRootVolume is the volume of the driver root, the pod's second.
	DriverRootVolume = "driver-root"
	envDevices       = "CUDA_VISIBLE_DEVICES"
	hashLetters      = 16
)

// PodName is the name of the daemon pod of id on node: stable, so that one
// id on one node is always one pod, and a valid DNS-1123 name whatever the
// id holds (a hash, not the id itself).
func PodName(node, id string) string {
	sum := sha256.Sum256([]byte(node + "\x00" + id))
	return namePrefix + hex.EncodeToString(sum[:])[:hashLetters]
}

// pod is the daemon pod of l on the launcher's node.
func (p *Launcher) pod(l mps.Launch, node metav1.OwnerReference) *corev1.Pod {
	labels := map[string]string{LabelName: AppName, LabelManagedBy: ManagedBy}
	if len(validation.IsValidLabelValue(l.ID)) == 0 {
		labels[LabelDaemon] = l.ID
	}
	names := make([]string, 0, len(l.Env))
	for k := range l.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	env := make([]corev1.EnvVar, 0, len(names))
	for _, k := range names {
		env = append(env, corev1.EnvVar{Name: k, Value: l.Env[k]})
	}
	dirType := corev1.HostPathDirectory // the Manager made it
	volumes := []corev1.Volume{{
		Name:         volumeName,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: l.Dir, Type: &dirType}},
	}}
	mounts := []corev1.VolumeMount{{Name: volumeName, MountPath: l.Dir}}
	if p.c.DriverRoot != "" {
		// The driver's: read-only, never created (a missing root is the
		// node's fault, which the pod's events then name).
		volumes = append(volumes, corev1.Volume{
			Name:         DriverRootVolume,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p.c.DriverRoot, Type: &dirType}},
		})
		mounts = append(mounts, corev1.VolumeMount{Name: DriverRootVolume, MountPath: p.c.DriverRootMount, ReadOnly: true})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(p.c.NodeName, l.ID),
			Namespace:       p.c.Namespace,
			Labels:          labels,
			Annotations:     map[string]string{AnnotationID: l.ID, AnnotationDir: l.Dir},
			OwnerReferences: []metav1.OwnerReference{node},
		},
		Spec: corev1.PodSpec{
			NodeName:                     p.c.NodeName,
			RestartPolicy:                corev1.RestartPolicyNever,
			ServiceAccountName:           p.c.ServiceAccount,
			AutomountServiceAccountToken: ptr(false),
			EnableServiceLinks:           ptr(false),
			PriorityClassName:            p.c.PriorityClassName,
			// It serves pods already running on the node, whatever taints
			// it has since.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           p.c.Image,
				ImagePullPolicy: p.c.ImagePullPolicy,
				Command:         slices.Clone(l.Argv),
				Env:             env,
				VolumeMounts:    mounts,
				SecurityContext: p.securityContext(),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
			Volumes: volumes,
		},
	}
}

// securityContext: privileged where the daemon opens the GPU device nodes
// (nvml: the device cgroup lets only a privileged container at them);
// otherwise root without capabilities, which owns the pipe directory the
// agent (root) made and can do nothing else.
func (p *Launcher) securityContext() *corev1.SecurityContext {
	if p.c.Privileged {
		return &corev1.SecurityContext{Privileged: ptr(true)}
	}
	return &corev1.SecurityContext{
		RunAsUser:                ptr(int64(0)),
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr(true),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func ptr[T any](v T) *T { return &v }
