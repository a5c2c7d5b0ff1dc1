package daemonpod

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/names"
)

// Labels and annotations of the daemon's pod. The chart's admission policy
// lets the agent create and delete only pods labelled AppName, named
// PodName of its node.
const (
	LabelName      = "app.kubernetes.io/name"
	AppName        = "tessera-imex-daemon"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "tessera"
	// AnnotationDomain is the domain the daemon serves.
	AnnotationDomain = names.NodeLabelFabricDomain
	// AnnotationPeers is the hash of the nodes file the daemon was started
	// with: a daemon whose domain changed members since is told apart.
	AnnotationPeers = names.DriverName + "/imex-peers"
)

// ContainerName is the daemon's one container.
const ContainerName = "imex"

const (
	namePrefix  = "tessera-imex-"
	volumeName  = "imex-dir"
	hashLetters = 16
	// ConfigName, NodesName and SocketName are the daemon's files in Dir.
	ConfigName = "config.cfg"
	NodesName  = "nodes_config.cfg"
	SocketName = "imex.sock"
)

// PodName is the name of the IMEX daemon pod of node: one per node, and a
// valid DNS-1123 name whatever the node is called.
func PodName(node string) string {
	sum := sha256.Sum256([]byte(node))
	return namePrefix + hex.EncodeToString(sum[:])[:hashLetters]
}

// peersHash is what AnnotationPeers holds for a nodes file.
func peersHash(nodesFile []byte) string {
	sum := sha256.Sum256(nodesFile)
	return hex.EncodeToString(sum[:])[:hashLetters]
}

// Spec is the daemon pod of c's node serving domain with the nodes file
// whose hash is peers, owned by node.
func (c *Config) Spec(domain, peers string, node metav1.OwnerReference) *corev1.Pod {
	dirType := corev1.HostPathDirectory // the agent made it
	volumes := []corev1.Volume{{
		Name:         volumeName,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: c.Dir, Type: &dirType}},
	}}
	mounts := []corev1.VolumeMount{{Name: volumeName, MountPath: c.Dir}}
	rootVolumes, rootMounts := c.DriverRootMounts()
	volumes, mounts = append(volumes, rootVolumes...), append(mounts, rootMounts...)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(c.NodeName),
			Namespace:       c.Namespace,
			Labels:          map[string]string{LabelName: AppName, LabelManagedBy: ManagedBy},
			Annotations:     map[string]string{AnnotationDomain: domain, AnnotationPeers: peers},
			OwnerReferences: []metav1.OwnerReference{node},
		},
		Spec: corev1.PodSpec{
			NodeName:                     c.NodeName,
			RestartPolicy:                corev1.RestartPolicyNever,
			ServiceAccountName:           c.ServiceAccount,
			AutomountServiceAccountToken: ptr(false),
			EnableServiceLinks:           ptr(false),
			PriorityClassName:            c.PriorityClassName,
			// Its peers reach it at the node's own address (SERVER_PORT).
			HostNetwork: true,
			// It serves pods already running on the node, whatever taints
			// it has since.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           c.Image,
				ImagePullPolicy: c.ImagePullPolicy,
				Command:         append(slices.Clone(c.Program), "-c", c.ConfigFile()),
				Env:             c.env(),
				VolumeMounts:    mounts,
				SecurityContext: c.SecurityContext(),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("32Mi"),
				}},
			}},
			Volumes: volumes,
		},
	}
}

// env is Env in name order.
func (c *Config) env() []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	return out
}

// ConfigFile is the daemon's config file, in Dir.
func (c *Config) ConfigFile() string { return filepath.Join(c.Dir, ConfigName) }

func ptr[T any](v T) *T { return &v }
