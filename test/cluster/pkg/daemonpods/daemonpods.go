// Package daemonpods builds the MPS daemon pod the agent's launcher
// (internal/mps/daemonpod) creates with the chart's flags, and the hostile
// variants of it that a stolen agent token could try. The chart's
// admission policy must admit the first and refuse every variant: the
// chart tests evaluate the policy with Kubernetes' CEL, test/e2e's
// TestChart sends each to the real API server.
package daemonpods

import (
	"context"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/internal/driverroot"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/mps/daemonpod"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

// ID is the daemon id of the pods built here.
const ID = "claim-1"

// Of is the daemon pod the launcher builds on node for a daemon under root,
// with the agent's daemon flags as the chart sets them (env: the agent
// container's TESSERA_* variables). v3 gives the MPS v3 command line. The
// pod is as the launcher sends it: no resourceVersion or UID. With a
// driver root (TESSERA_NVIDIA_DRIVER_ROOT) the control program is the
// driver's in its first program directory and, but with backend sim, the
// daemon's LD_LIBRARY_PATH its first library directory (ControlIn and
// LibraryPathIn give the others).
func Of(env map[string]string, namespace, node, root string, v3 bool) (*corev1.Pod, error) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	driverRoot, mount := env["TESSERA_NVIDIA_DRIVER_ROOT"], env["TESSERA_NVIDIA_DRIVER_ROOT_MOUNT"]
	settings := Settings(env, namespace, node)
	settings.DriverRoot, settings.DriverRootMount = driverRoot, mount
	l, err := daemonpod.New(daemonpod.Config{Client: client, Settings: settings})
	if err != nil {
		return nil, err
	}
	// The launch internal/mps's Manager asks for (launchOf, argv, v3Argv).
	dir := strings.TrimSuffix(root, "/") + "/" + ID
	control := strings.Fields(env["TESSERA_MPS_CONTROL"])
	daemonEnv := map[string]string{
		"CUDA_VISIBLE_DEVICES": "GPU-1", "CUDA_MPS_PIPE_DIRECTORY": dir + "/pipe",
		"CUDA_MPS_LOG_DIRECTORY": dir + "/log", mps.EnvDaemonID: ID,
	}
	if driverRoot != "" {
		control = []string{ControlIn(mount, driverroot.BinaryDirs[0])}
		if env["TESSERA_BACKEND"] != "sim" {
			daemonEnv[mps.EnvLibraryPath] = LibraryPathIn(mount, driverroot.LibraryDirs[0])
		}
	}
	argv := append(control, "-f")
	if v3 {
		argv = append(argv, "-p", "3", "-a", dir+"/mps.toml")
	}
	h, err := l.Launch(context.Background(), mps.Launch{ID: ID, Argv: argv, Dir: dir, Env: daemonEnv})
	if err != nil {
		return nil, err
	}
	_, name, _ := strings.Cut(h.Pod, "/")
	p, err := client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the launcher's pod: %w", err)
	}
	p.ResourceVersion, p.UID = "", ""
	return p, nil
}

// Settings are the daemon pods' settings on node the chart's env gives the
// agent (TESSERA_MPS_DAEMON_*), without a driver root.
func Settings(env map[string]string, namespace, node string) nodepod.Settings {
	return nodepod.Settings{
		Namespace: namespace, NodeName: node, Image: env["TESSERA_MPS_DAEMON_IMAGE"],
		ServiceAccount: env["TESSERA_MPS_DAEMON_SERVICE_ACCOUNT"], Privileged: env["TESSERA_MPS_DAEMON_PRIVILEGED"] == "true",
		PriorityClassName: env["TESSERA_MPS_DAEMON_PRIORITY_CLASS"],
	}
}

// ControlIn is the MPS control program in dir (one of
// driverroot.BinaryDirs) of a driver root mounted at mount.
func ControlIn(mount, dir string) string { return path.Join(mount, dir, driverroot.MPSControl) }

// LibraryPathIn is the LD_LIBRARY_PATH of library directory dir (one of
// driverroot.LibraryDirs) of a driver root mounted at mount.
func LibraryPathIn(mount, dir string) string { return path.Join(mount, dir) }

// Case is one variant of the launcher's pod.
type Case struct {
	Name string
	Pod  *corev1.Pod
	// Field is what the policy's refusal names; "" when the variant is
	// admitted.
	Field string
	// Invalid: the API server's own validation refuses the variant before
	// any admission policy sees it (a host path with ".."); the policy
	// refuses it all the same, should that validation ever change.
	Invalid bool
}

// Hostile is good changed one way at a time, each a way a stolen agent
// token could use a daemon pod to take more than the daemon needs. root is
// the install's MPS root (the daemon's directory is root/ID); privileged
// whether the install's daemons run privileged (then a privileged variant is
// admitted). Every variant is a valid pod, so that the API server's own
// validation does not refuse it before the policy. runtimeClass names a
// RuntimeClass that exists (the API server refuses an unknown one first).
func Hostile(good *corev1.Pod, root string, privileged bool, runtimeClass string) []Case {
	root = strings.TrimSuffix(root, "/")
	dir := root + "/" + ID
	pod := func(f func(*corev1.Pod)) *corev1.Pod {
		p := good.DeepCopy()
		f(p)
		return p
	}
	ctr := func(f func(*corev1.Container)) *corev1.Pod {
		return pod(func(p *corev1.Pod) { f(&p.Spec.Containers[0]) })
	}
	sc := func(f func(*corev1.SecurityContext)) *corev1.Pod {
		return ctr(func(c *corev1.Container) {
			if c.SecurityContext == nil {
				c.SecurityContext = &corev1.SecurityContext{}
			}
			f(c.SecurityContext)
		})
	}
	psc := func(f func(*corev1.PodSecurityContext)) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
			f(p.Spec.SecurityContext)
		})
	}
	// hostPath moves the daemon's volume, its mount and the annotation
	// together, so that only the path's shape is wrong.
	hostPath := func(path string) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			p.Spec.Volumes[0].HostPath.Path = path
			p.Spec.Containers[0].VolumeMounts[0].MountPath = path
			p.Annotations[daemonpod.AnnotationDir] = path
		})
	}
	setEnv := func(name string, v corev1.EnvVar) *corev1.Pod {
		return ctr(func(c *corev1.Container) {
			for i := range c.Env {
				if c.Env[i].Name == name {
					c.Env[i] = v
				}
			}
		})
	}
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "tessera-webhook-tls"}, Key: "tls.key"}}
	execHandler := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{dir + "/pipe/x"}}}
	cases := []Case{
		// What the agent runs.
		{Name: "a command a tenant dropped in its pipe directory", Pod: ctr(func(c *corev1.Container) { c.Command = []string{dir + "/pipe/x"} }), Field: "command"},
		{Name: "a shell", Pod: ctr(func(c *corev1.Container) { c.Command = []string{"/bin/sh", "-c", "cat /etc/shadow"} }), Field: "command"},
		{Name: "the daemon's command with args", Pod: ctr(func(c *corev1.Container) { c.Args = []string{"-d"} }), Field: "args"},
		{Name: "the v3 config from elsewhere", Pod: ctr(func(c *corev1.Container) {
			c.Command = append(c.Command[:len(c.Command)-1:len(c.Command)-1], "-f", "-p", "3", "-a", dir+"/pipe/mps.toml")
		}), Field: "command"},
		{Name: "a working directory", Pod: ctr(func(c *corev1.Container) { c.WorkingDir = dir + "/pipe" }), Field: "workingDir"},
		{Name: "a postStart hook", Pod: ctr(func(c *corev1.Container) {
			c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: execHandler.Exec}}
		}), Field: "lifecycle"},
		{Name: "an exec liveness probe", Pod: ctr(func(c *corev1.Container) { c.LivenessProbe = &corev1.Probe{ProbeHandler: execHandler} }), Field: "livenessProbe"},
		{Name: "an exec startup probe", Pod: ctr(func(c *corev1.Container) { c.StartupProbe = &corev1.Probe{ProbeHandler: execHandler} }), Field: "startupProbe"},
		// What it reads.
		{Name: "env from a Secret", Pod: setEnv("CUDA_VISIBLE_DEVICES", corev1.EnvVar{Name: "CUDA_VISIBLE_DEVICES", ValueFrom: secret}), Field: "valueFrom"},
		{Name: "an extra env from a Secret", Pod: ctr(func(c *corev1.Container) { c.Env = append(c.Env, corev1.EnvVar{Name: "KEY", ValueFrom: secret}) }), Field: "env"},
		{Name: "envFrom a Secret", Pod: ctr(func(c *corev1.Container) {
			c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sh.helm.release.v1.tessera.v1"}}}}
		}), Field: "envFrom"},
		{Name: "LD_PRELOAD", Pod: ctr(func(c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: dir + "/pipe/x.so"})
		}), Field: "env"},
		{Name: "the pipe directory elsewhere", Pod: setEnv("CUDA_MPS_PIPE_DIRECTORY", corev1.EnvVar{Name: "CUDA_MPS_PIPE_DIRECTORY", Value: "/"}), Field: "env"},
		{Name: "logs read back as the termination message", Pod: ctr(func(c *corev1.Container) {
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}), Field: "terminationMessagePolicy"},
		{Name: "a termination message file in the daemon directory", Pod: ctr(func(c *corev1.Container) { c.TerminationMessagePath = dir + "/pipe/msg" }), Field: "terminationMessagePath"},
		// What it reaches.
		{Name: "a hostPort", Pod: ctr(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: 2222}} }), Field: "ports"},
		{Name: "a container port", Pod: ctr(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 8080}} }), Field: "ports"},
		{Name: "host root", Pod: hostPath("/"), Field: "spec.volumes"},
		{Name: "below a tenant's pipe directory", Pod: hostPath(dir + "/pipe/escape"), Field: "spec.volumes"},
		{Name: "the MPS root itself", Pod: hostPath(root), Field: "spec.volumes"},
		{Name: "out of the root by ..", Pod: hostPath(root + "/../../../etc"), Field: "spec.volumes", Invalid: true},
		{Name: "the root's parent by ..", Pod: hostPath(root + "/.."), Field: "spec.volumes", Invalid: true},
		{Name: "a sibling of the root", Pod: hostPath(root + "x/" + ID), Field: "spec.volumes"},
		{Name: "a host path created if missing", Pod: pod(func(p *corev1.Pod) {
			t := corev1.HostPathDirectoryOrCreate
			p.Spec.Volumes[0].HostPath.Type = &t
		}), Field: "type Directory"},
		{Name: "a host path of any type", Pod: pod(func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Type = nil }), Field: "type Directory"},
		{Name: "an emptyDir beside", Pod: pod(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}), Field: "spec.volumes"},
		{Name: "a subPath below the pipe directory", Pod: ctr(func(c *corev1.Container) { c.VolumeMounts[0].SubPath = "pipe/escape" }), Field: "subPath"},
		{Name: "mounted elsewhere", Pod: ctr(func(c *corev1.Container) { c.VolumeMounts[0].MountPath = "/usr/bin" }), Field: "volumeMounts"},
		{Name: "a resource claim", Pod: pod(func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("c")}}
		}), Field: "spec.resourceClaims"},
		{Name: "a CDI device by annotation", Pod: pod(func(p *corev1.Pod) { p.Annotations["cdi.k8s.io/gpu"] = "nvidia.com/gpu=all" }), Field: "metadata.annotations"},
		{Name: "another label", Pod: pod(func(p *corev1.Pod) { p.Labels["app.kubernetes.io/instance"] = "tessera" }), Field: "metadata.labels"},
		{Name: "an annotation naming another directory", Pod: pod(func(p *corev1.Pod) { p.Annotations[daemonpod.AnnotationDir] = root + "/other" }), Field: "metadata.annotations"},
		// Who it is.
		{Name: "another node", Pod: pod(func(p *corev1.Pod) { p.Spec.NodeName = "gpu-other" }), Field: "spec.nodeName"},
		{Name: "no daemon label", Pod: pod(func(p *corev1.Pod) { delete(p.Labels, daemonpod.LabelName) }), Field: "metadata.labels"},
		{Name: "another service account", Pod: pod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }), Field: "spec.serviceAccountName"},
		{Name: "token mounted", Pod: pod(func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil }), Field: "spec.automountServiceAccountToken"},
		{Name: "hostPID", Pod: pod(func(p *corev1.Pod) { p.Spec.HostPID = true }), Field: "spec.hostPID"},
		{Name: "hostNetwork", Pod: pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), Field: "spec.hostNetwork"},
		{Name: "hostIPC", Pod: pod(func(p *corev1.Pod) { p.Spec.HostIPC = true }), Field: "spec.hostIPC"},
		{Name: "another image", Pod: ctr(func(c *corev1.Container) { c.Image = "registry.example/miner:latest" }), Field: "image"},
		{Name: "two containers", Pod: pod(func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Name = "second"
			p.Spec.Containers = append(p.Spec.Containers, c)
		}), Field: "spec.containers"},
		{Name: "an init container", Pod: pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: good.Spec.Containers[0].Image}}
		}), Field: "spec.initContainers"},
		{Name: "another container name", Pod: ctr(func(c *corev1.Container) { c.Name = "x" }), Field: "spec.containers[0]"},
		{Name: "another runtime class", Pod: pod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr(runtimeClass) }), Field: "spec.runtimeClassName"},
		{Name: "image pull secrets", Pod: pod(func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "tessera-webhook-tls"}}
		}), Field: "spec.imagePullSecrets"},
		{Name: "an unconfined SELinux type", Pod: psc(func(s *corev1.PodSecurityContext) { s.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"} }), Field: "spec.securityContext"},
		{Name: "a supplemental group", Pod: psc(func(s *corev1.PodSecurityContext) { s.SupplementalGroups = []int64{6} }), Field: "spec.securityContext"},
		{Name: "a sysctl", Pod: psc(func(s *corev1.PodSecurityContext) {
			s.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ping_group_range", Value: "0 0"}}
		}), Field: "spec.securityContext"},
		{Name: "another priority class", Pod: pod(func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }), Field: "spec.priorityClassName"},
		{Name: "an added capability", Pod: sc(func(s *corev1.SecurityContext) {
			if s.Capabilities == nil {
				s.Capabilities = &corev1.Capabilities{}
			}
			s.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}), Field: "securityContext"},
		{Name: "an unconfined AppArmor profile", Pod: sc(func(s *corev1.SecurityContext) {
			s.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}), Field: "securityContext"},
		// The API server admits an unmasked /proc only in a user namespace.
		{Name: "an unmasked /proc", Pod: pod(func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr(false)
			if p.Spec.Containers[0].SecurityContext == nil {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{}
			}
			p.Spec.Containers[0].SecurityContext.ProcMount = ptr(corev1.UnmaskedProcMount)
		}), Field: "securityContext"},
	}
	cases = append(cases, driverRootCases(good, dir, privileged)...)
	if privileged {
		cases = append(cases,
			Case{Name: "Bidirectional propagation", Pod: ctr(func(c *corev1.Container) {
				c.VolumeMounts[0].MountPropagation = ptr(corev1.MountPropagationBidirectional)
			}), Field: "mountPropagation"},
			Case{Name: "privileged as the install's daemons are", Pod: sc(func(s *corev1.SecurityContext) { s.Privileged = ptr(true) })},
		)
	} else {
		cases = append(cases,
			Case{Name: "privileged", Pod: sc(func(s *corev1.SecurityContext) { s.Privileged = ptr(true) }), Field: "securityContext"},
			Case{Name: "HostToContainer propagation", Pod: ctr(func(c *corev1.Container) {
				c.VolumeMounts[0].MountPropagation = ptr(corev1.MountPropagationHostToContainer)
			}), Field: "mountPropagation"},
			Case{Name: "an unconfined seccomp profile", Pod: sc(func(s *corev1.SecurityContext) {
				s.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
			}), Field: "securityContext"},
			Case{Name: "privilege escalation", Pod: sc(func(s *corev1.SecurityContext) { s.AllowPrivilegeEscalation = ptr(true) }), Field: "securityContext"},
			Case{Name: "a writable root", Pod: sc(func(s *corev1.SecurityContext) { s.ReadOnlyRootFilesystem = ptr(false) }), Field: "securityContext"},
		)
	}
	return cases
}

func ptr[T any](v T) *T { return &v }
