package chart

import (
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func hooks(t *testing.T, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := chart(t).RenderHooks(ns, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// hostPaths are the host paths of a pod's volumes; those of the volumes
// named in parents by their parent directories.
func hostPaths(spec *corev1.PodSpec, parents ...string) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			p := v.HostPath.Path
			if slices.Contains(parents, v.Name) {
				p = path.Dir(p)
			}
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// TestUninstallHooks: helm uninstall first runs the check Job (pre-delete),
// then, once the release's objects are gone, a cleanup DaemonSet per agent
// DaemonSet and the Job that waits for it (post-delete). The cleanup pods
// are the agent's pods (its nodes, host paths, flags and security context,
// the plugin directory's parent so that it can go) but with no API token;
// the Jobs run as non-root with no host path, no capability and a
// read-only root.
func TestUninstallHooks(t *testing.T) {
	for _, sets := range [][]string{{"backend=sim", "memoryLimits.enabled=true"}, {"backend=nvml", "memoryLimits.enabled=true"}} {
		objs := hooks(t, sets...)
		agent, _ := daemonSet(t, render(t, sets...))
		clean := one[appsv1.DaemonSet](t, objs, "DaemonSet", "tessera-uninstall")
		if ev := clean.Annotations["helm.sh/hook"]; ev != "post-delete" {
			t.Errorf("%v: cleanup DaemonSet at %q, want post-delete", sets, ev)
		}
		pod, want := &clean.Spec.Template.Spec, &agent.Spec.Template.Spec
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%v: the cleanup pods get an API token", sets)
		}
		c, a := pod.Containers[0], want.Containers[0]
		if !reflect.DeepEqual(c.SecurityContext, a.SecurityContext) || !reflect.DeepEqual(c.Env, a.Env) {
			t.Errorf("%v: cleanup container's security context or env differ from the agent's:\n%+v\n%+v", sets, c.SecurityContext, a.SecurityContext)
		}
		if got := strings.Join(c.Command, " "); got != "/usr/bin/tessera-kubelet-plugin uninstall node" {
			t.Errorf("%v: cleanup command %q", sets, got)
		}
		if pod.HostNetwork != want.HostNetwork || !reflect.DeepEqual(pod.NodeSelector, want.NodeSelector) ||
			!reflect.DeepEqual(pod.Affinity, want.Affinity) || !reflect.DeepEqual(pod.Tolerations, want.Tolerations) {
			t.Errorf("%v: cleanup pods are not placed as the agent's", sets)
		}
		// What goes whole (the plugin directory, the MPS root, the
		// memory limit records) is mounted by its parent: a mount point
		// cannot be removed.
		wantPaths := hostPaths(want, "plugin-data", "mps", "memory-limit-state")
		if got := hostPaths(pod); !slices.Equal(got, wantPaths) {
			t.Errorf("%v: cleanup host paths %q, want the agent's with those removed whole by their parents %q", sets, got, wantPaths)
		}
		for name, event := range map[string]string{"tessera-uninstall-check": "pre-delete", "tessera-uninstall-wait": "post-delete"} {
			job := one[batchv1.Job](t, objs, "Job", name)
			if ev := job.Annotations["helm.sh/hook"]; ev != event {
				t.Errorf("%v: %s at %q, want %s", sets, name, ev, event)
			}
			js := job.Spec.Template.Spec
			sc := js.Containers[0].SecurityContext
			if hp := hostPaths(&js); len(hp) > 0 || js.SecurityContext == nil || js.SecurityContext.RunAsNonRoot == nil || !*js.SecurityContext.RunAsNonRoot ||
				sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%v: %s runs with host paths %q or as %+v / %+v", sets, name, hp, js.SecurityContext, sc)
			}
			if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
				t.Errorf("%v: %s retries: a refusal must end the uninstall", sets, name)
			}
		}
	}
}

// TestUninstallRights: the hooks' ServiceAccount may list claims (to see
// which are in use), list and delete pods in the release's namespace (the
// MPS daemon pods) and get the cleanup DaemonSets by name; nothing else.
func TestUninstallRights(t *testing.T) {
	objs := hooks(t, "nodeGroups[0].name=a", "nodeGroups[0].nodeSelector.m=a", "nodeGroups[1].name=b", "nodeGroups[1].nodeSelector.m=b")
	cr := one[rbacv1.ClusterRole](t, objs, "ClusterRole", "tessera-uninstall")
	if want := []rbacv1.PolicyRule{{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"list"}}}; !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("ClusterRole rules %+v, want %+v", cr.Rules, want)
	}
	role := one[rbacv1.Role](t, objs, "Role", "tessera-uninstall")
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "deletecollection"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{"tessera-a-uninstall", "tessera-b-uninstall"}, Verbs: []string{"get"}},
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("Role rules %+v, want %+v", role.Rules, want)
	}
	for _, name := range []string{"tessera-a-uninstall", "tessera-b-uninstall"} {
		one[appsv1.DaemonSet](t, objs, "DaemonSet", name)
	}
	if job := one[batchv1.Job](t, objs, "Job", "tessera-uninstall-wait"); !slices.Contains(job.Spec.Template.Spec.Containers[0].Args, "--daemonset=tessera-b-uninstall") {
		t.Errorf("the wait Job's args %q leave out a group's cleanup", job.Spec.Template.Spec.Containers[0].Args)
	}
	for _, o := range objs {
		if pol := o.GetAnnotations()["helm.sh/hook-delete-policy"]; pol != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s/%s: delete policy %q: a hook must go when the uninstall succeeds", o.GetKind(), o.GetName(), pol)
		}
	}
}

// TestUninstallOff: uninstall.enabled=false renders no hook.
func TestUninstallOff(t *testing.T) {
	if objs := hooks(t, "uninstall.enabled=false"); len(objs) != 0 {
		t.Errorf("hooks with uninstall off: %v", kinds(objs))
	}
}
