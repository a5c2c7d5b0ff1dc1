package chart

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestSecurityContext: the agent's security context per backend (and
// privileged overriding it). Only nvml, and auto which may become nvml on
// the node, run privileged; the others drop every capability but what
// their backend needs, under the runtime's seccomp profile. UID 0 always
// (the host directories it writes are root's).
func TestSecurityContext(t *testing.T) {
	for _, tc := range []struct {
		sets       []string
		privileged bool
		add        []corev1.Capability
	}{
		{nil, true, nil}, // auto
		{[]string{"backend=nvml"}, true, nil},
		{[]string{"backend=amd"}, false, nil},
		{[]string{"backend=sim"}, false, []corev1.Capability{"MKNOD"}},
		{[]string{"backend=nvml", "privileged=false"}, false, nil},
		{[]string{"backend=auto", "privileged=false"}, false, nil},
		{[]string{"backend=amd", "privileged=true"}, true, nil},
	} {
		t.Run(strings.Join(append([]string{"defaults"}, tc.sets...), ","), func(t *testing.T) {
			_, c := daemonSet(t, render(t, tc.sets...))
			sc := c.SecurityContext
			if sc == nil {
				t.Fatal("no securityContext")
			}
			if sc.Privileged == nil || *sc.Privileged != tc.privileged {
				t.Errorf("privileged %v, want %v", deref(sc.Privileged), tc.privileged)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Error("root filesystem not read-only")
			}
			if sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.RunAsGroup == nil || *sc.RunAsGroup != 0 {
				t.Errorf("runAsUser %v runAsGroup %v, want 0 and 0", deref(sc.RunAsUser), deref(sc.RunAsGroup))
			}
			if tc.privileged {
				// Capabilities and seccomp mean nothing to a privileged
				// container; rendering them would pretend they do.
				if sc.Capabilities != nil || sc.SeccompProfile != nil || sc.AllowPrivilegeEscalation != nil {
					t.Errorf("privileged with capabilities %+v, seccomp %+v, allowPrivilegeEscalation %v", sc.Capabilities, sc.SeccompProfile, deref(sc.AllowPrivilegeEscalation))
				}
				return
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("allowPrivilegeEscalation %v, want false", deref(sc.AllowPrivilegeEscalation))
			}
			if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !reflect.DeepEqual(sc.Capabilities.Add, tc.add) {
				t.Errorf("capabilities %+v, want drop [ALL] add %v", sc.Capabilities, tc.add)
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
			}
		})
	}
}

// TestSimImage: backend sim runs the image with the simulator's tools; the
// production image is every other backend's.
func TestSimImage(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{nil, "ghcr.io/tessera-gpu/tessera-kubelet-plugin:0.1.0"},
		{[]string{"backend=nvml", "image.tag=v2"}, "ghcr.io/tessera-gpu/tessera-kubelet-plugin:v2"},
		{[]string{"backend=sim"}, "ghcr.io/tessera-gpu/tessera-kubelet-plugin-sim:0.1.0"},
		{[]string{"backend=sim", "image.tag=v2"}, "ghcr.io/tessera-gpu/tessera-kubelet-plugin-sim:v2"},
		{[]string{"backend=sim", "image.tag=v2", "sim.image.repository=r.example/sim", "sim.image.tag=v3"}, "r.example/sim:v3"},
	} {
		if _, c := daemonSet(t, render(t, tc.sets...)); c.Image != tc.want {
			t.Errorf("%v: image %s, want %s", tc.sets, c.Image, tc.want)
		}
	}
}

// TestGPUNodeAffinity: by default the agent goes only to nodes carrying a
// GPU label of its backend's vendor, so it stays off control-plane and CPU
// nodes although it tolerates every taint; affinity replaces it, and sim
// (no PCI GPUs) and gpuNodeAffinity.enabled=false get none.
func TestGPUNodeAffinity(t *testing.T) {
	nvidia := []string{
		"feature.node.kubernetes.io/pci-10de.present",
		"feature.node.kubernetes.io/pci-0302_10de.present",
		"feature.node.kubernetes.io/pci-0300_10de.present",
		"nvidia.com/gpu.present",
	}
	amd := []string{
		"feature.node.kubernetes.io/pci-1002.present",
		"feature.node.kubernetes.io/pci-0300_1002.present",
		"feature.node.kubernetes.io/pci-0380_1002.present",
		"feature.node.kubernetes.io/pci-1200_1002.present",
		"feature.node.kubernetes.io/amd-gpu",
	}
	for _, tc := range []struct {
		sets []string
		want []string // labels, one term each; nil: no affinity
	}{
		{nil, append(append([]string{}, nvidia...), amd...)},
		{[]string{"backend=nvml"}, nvidia},
		{[]string{"backend=amd"}, amd},
		{[]string{"backend=sim"}, nil},
		{[]string{"gpuNodeAffinity.enabled=false"}, nil},
		{[]string{"backend=nvml", "gpuNodeAffinity.nvidia={example.com/gpu}"}, []string{"example.com/gpu"}},
	} {
		ds, _ := daemonSet(t, render(t, tc.sets...))
		aff := ds.Spec.Template.Spec.Affinity
		if tc.want == nil {
			if aff != nil {
				t.Errorf("%v: affinity %+v, want none", tc.sets, aff)
			}
			continue
		}
		if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			t.Errorf("%v: no required node affinity", tc.sets)
			continue
		}
		var got []string
		for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if len(term.MatchExpressions) != 1 || len(term.MatchFields) != 0 {
				t.Errorf("%v: term %+v, want one expression (terms are ORed)", tc.sets, term)
				continue
			}
			e := term.MatchExpressions[0]
			if e.Operator != corev1.NodeSelectorOpIn || !reflect.DeepEqual(e.Values, []string{"true"}) {
				t.Errorf("%v: %s %s %v, want In [true]", tc.sets, e.Key, e.Operator, e.Values)
			}
			got = append(got, e.Key)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: labels %v, want %v", tc.sets, got, tc.want)
		}
	}
	// An operator's affinity replaces the GPU one whole.
	ds, _ := daemonSet(t, render(t, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
		"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists"))
	terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "pool" {
		t.Errorf("affinity set: terms %+v, want only the operator's", terms)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestClaimStatusRule: resourceclaims/status is granted only where the
// API server can narrow it to the agent's node (1.36+, rbac.claimStatus
// auto), or when the operator asks for it on an older version.
func TestClaimStatusRule(t *testing.T) {
	for _, tc := range []struct {
		kube, value string
		want        bool
	}{
		{"v1.35.3", "auto", false},
		{"v1.36.0", "auto", true},
		{"v1.37.2", "auto", true},
		{"v1.35.3", "always", true},
		{"v1.34.0", "always", true},
		{"v1.37.2", "never", false},
	} {
		ch := chart(t)
		ch.KubeVersion = tc.kube
		objs, err := ch.Render(ns, "rbac.claimStatus="+tc.value)
		if err != nil {
			t.Fatal(err)
		}
		cr := one[rbacv1.ClusterRole](t, objs, "ClusterRole", "tessera")
		var status, driver bool
		for _, r := range cr.Rules {
			for _, res := range r.Resources {
				status = status || res == "resourceclaims/status"
				driver = driver || res == "resourceclaims/driver"
			}
		}
		if status != tc.want || driver != tc.want {
			t.Errorf("Kubernetes %s, rbac.claimStatus=%s: resourceclaims/status %v, resourceclaims/driver %v, want %v", tc.kube, tc.value, status, driver, tc.want)
		}
		// The rest of the role is the same whatever the version.
		if len(cr.Rules) < 3 {
			t.Errorf("Kubernetes %s: %d rules", tc.kube, len(cr.Rules))
		}
	}
	if _, err := chart(t).Template(ns, "rbac.claimStatus=sometimes"); err == nil || !strings.Contains(err.Error(), "rbac.claimStatus must be auto, always or never") {
		t.Errorf("rbac.claimStatus=sometimes: %v", err)
	}
}
