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
	"github.com/tessera-gpu/tessera/internal/nodepod"
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
	DriverRootVolume = nodepod.DriverRootVolume
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
	rootVolumes, rootMounts := p.c.DriverRootMounts()
	volumes, mounts = append(volumes, rootVolumes...), append(mounts, rootMounts...)
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
				SecurityContext: p.c.SecurityContext(),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
			Volumes: volumes,
		},
	}
}

func ptr[T any](v T) *T { return &v }
