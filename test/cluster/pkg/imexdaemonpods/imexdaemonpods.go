// Package imexdaemonpods builds the IMEX daemon pod the agent
// (internal/imex/daemonpod) creates with the chart's flags, and the
// hostile variants of it that a stolen agent token could try. The chart's
// admission policy must admit the first and refuse every variant: the
// chart tests evaluate the policy with Kubernetes' CEL, test/e2e's
// TestChart sends each to the real API server.
package imexdaemonpods

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/internal/driverroot"
	"github.com/tessera-gpu/tessera/internal/imex/daemonpod"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/daemonpods"
)

// Domain is the domain the pods built here serve.
const Domain = "00000001-0000-0000-0000-000000000001.2"

// Of is the daemon pod the agent builds on node with the chart's env (the
// agent container's TESSERA_* variables) and dir, the node's IMEX
// directory. With a driver root the program is the driver's nvidia-imex
// in its first program directory, with its first library directory as
// LD_LIBRARY_PATH; backend sim runs the image's stand-in.
func Of(env map[string]string, namespace, node, dir string) (*corev1.Pod, error) {
	c := daemonpod.Config{
		Client: fake.NewClientset(), Settings: daemonpods.Settings(env, namespace, node), Dir: dir,
		Program: []string{"/usr/bin/tessera-sim", "imex"},
	}
	if env["TESSERA_BACKEND"] != "sim" {
		mount := env["TESSERA_NVIDIA_DRIVER_ROOT_MOUNT"]
		c.DriverRoot, c.DriverRootMount = env["TESSERA_NVIDIA_DRIVER_ROOT"], mount
		c.Program = []string{path.Join(mount, driverroot.BinaryDirs[0], "nvidia-imex")}
		c.Env = map[string]string{mps.EnvLibraryPath: daemonpods.LibraryPathIn(mount, driverroot.LibraryDirs[0])}
	}
	if _, err := daemonpod.New(c); err != nil {
		return nil, err
	}
	no := false
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node, UID: "node-uid", BlockOwnerDeletion: &no}
	return c.Spec(Domain, "0123456789abcdef", owner), nil
}

// Hostile is good changed one way at a time, each a way a stolen agent
// token could use the IMEX daemon pod to take more than the daemon needs.
// dir is the node's IMEX directory; privileged whether the install's
// daemon pods run privileged (then a privileged variant is admitted).
// runtimeClass names a RuntimeClass that exists.
func Hostile(good *corev1.Pod, dir string, privileged bool, runtimeClass string) []daemonpods.Case {
	pod := func(f func(*corev1.Pod)) *corev1.Pod {
		p := good.DeepCopy()
		f(p)
		return p
	}
	ctr := func(f func(*corev1.Container)) *corev1.Pod {
		return pod(func(p *corev1.Pod) { f(&p.Spec.Containers[0]) })
	}
	hostPath := func(p string) *corev1.Pod {
		return pod(func(pod *corev1.Pod) {
			pod.Spec.Volumes[0].HostPath.Path = p
			pod.Spec.Containers[0].VolumeMounts[0].MountPath = p
			cmd := pod.Spec.Containers[0].Command
			cmd[len(cmd)-1] = p + "/config.cfg"
		})
	}
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "tessera-webhook-tls"}, Key: "tls.key"}}
	exec := &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "cat /etc/shadow"}}
	cases := []daemonpods.Case{
		{Name: "a shell", Pod: ctr(func(c *corev1.Container) { c.Command = []string{"/bin/sh", "-c", "cat /etc/shadow"} }), Field: "command"},
		{Name: "the daemon with another config", Pod: ctr(func(c *corev1.Container) { c.Command[len(c.Command)-1] = "/etc/nvidia-imex/config.cfg" }), Field: "command"},
		{Name: "the daemon with args", Pod: ctr(func(c *corev1.Container) { c.Args = []string{"-d"} }), Field: "args"},
		{Name: "a working directory", Pod: ctr(func(c *corev1.Container) { c.WorkingDir = "/" }), Field: "workingDir"},
		{Name: "an exec readiness probe", Pod: ctr(func(c *corev1.Container) {
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: exec}}
		}), Field: "readinessProbe"},
		{Name: "a postStart hook", Pod: ctr(func(c *corev1.Container) {
			c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: exec}}
		}), Field: "lifecycle"},
		{Name: "env from a Secret", Pod: ctr(func(c *corev1.Container) { c.Env = []corev1.EnvVar{{Name: "KEY", ValueFrom: secret}} }), Field: "env"},
		{Name: "LD_PRELOAD", Pod: ctr(func(c *corev1.Container) { c.Env = []corev1.EnvVar{{Name: "LD_PRELOAD", Value: dir + "/x.so"}} }), Field: "env"},
		{Name: "LD_LIBRARY_PATH into the IMEX directory", Pod: ctr(func(c *corev1.Container) { c.Env = []corev1.EnvVar{{Name: "LD_LIBRARY_PATH", Value: dir}} }), Field: "env"},
		{Name: "envFrom a Secret", Pod: ctr(func(c *corev1.Container) {
			c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sh.helm.release.v1.tessera.v1"}}}}
		}), Field: "envFrom"},
		{Name: "logs read back as the termination message", Pod: ctr(func(c *corev1.Container) {
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}), Field: "terminationMessagePolicy"},
		{Name: "a hostPort", Pod: ctr(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: 22}} }), Field: "ports"},
		{Name: "host root", Pod: hostPath("/"), Field: "spec.volumes"},
		{Name: "another node's IMEX directory", Pod: hostPath(dir + "-other"), Field: "spec.volumes"},
		{Name: "a host path created if missing", Pod: pod(func(p *corev1.Pod) {
			t := corev1.HostPathDirectoryOrCreate
			p.Spec.Volumes[0].HostPath.Type = &t
		}), Field: "spec.volumes"},
		{Name: "an emptyDir beside", Pod: pod(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}), Field: "spec.volumes"},
		{Name: "the directory mounted over /usr/bin", Pod: ctr(func(c *corev1.Container) { c.VolumeMounts[0].MountPath = "/usr/bin" }), Field: "volumeMounts"},
		{Name: "a subPath", Pod: ctr(func(c *corev1.Container) { c.VolumeMounts[0].SubPath = "x" }), Field: "subPath"},
		{Name: "the host's PIDs", Pod: pod(func(p *corev1.Pod) { p.Spec.HostPID = true }), Field: "spec.hostPID"},
		{Name: "off the host network", Pod: pod(func(p *corev1.Pod) { p.Spec.HostNetwork = false }), Field: "spec.hostNetwork"},
		{Name: "a token", Pod: pod(func(p *corev1.Pod) { t := true; p.Spec.AutomountServiceAccountToken = &t }), Field: "automountServiceAccountToken"},
		{Name: "the agent's service account", Pod: pod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "tessera" }), Field: "serviceAccountName"},
		{Name: "another image", Pod: ctr(func(c *corev1.Container) { c.Image = "busybox" }), Field: "image"},
		{Name: "a second container", Pod: pod(func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Name = "x"
			p.Spec.Containers = append(p.Spec.Containers, c)
		}), Field: "spec.containers"},
		{Name: "a CDI annotation", Pod: pod(func(p *corev1.Pod) { p.Annotations["cdi.k8s.io/x"] = "nvidia.com/gpu=all" }), Field: "metadata.annotations"},
		{Name: "another label", Pod: pod(func(p *corev1.Pod) { p.Labels["app"] = "web" }), Field: "metadata.labels"},
		{Name: "a runtime class", Pod: pod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = &runtimeClass }), Field: "spec.runtimeClassName"},
		{Name: "a host alias", Pod: pod(func(p *corev1.Pod) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.9", Hostnames: []string{"peer"}}}
		}), Field: "spec.hostAliases"},
		{Name: "a resource claim", Pod: pod(func(p *corev1.Pod) {
			name := "c"
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
		}), Field: "spec.resourceClaims"},
		{Name: "capabilities added", Pod: ctr(func(c *corev1.Container) {
			if c.SecurityContext.Capabilities == nil {
				c.SecurityContext.Capabilities = &corev1.Capabilities{}
			}
			c.SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}), Field: "securityContext"},
	}
	priv := true
	privileged_ := ctr(func(c *corev1.Container) { c.SecurityContext = &corev1.SecurityContext{Privileged: &priv} })
	if privileged {
		cases = append(cases, daemonpods.Case{Name: "privileged, as the install's daemons", Pod: privileged_})
	} else {
		cases = append(cases, daemonpods.Case{Name: "privileged", Pod: privileged_, Field: "securityContext"})
	}
	return cases
}
