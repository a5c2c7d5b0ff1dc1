package chart

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/channelcases"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

// TestIMEXChannelPolicies: with imex.channels, the agent's token may write
// its domain's channel pool exactly as its publisher builds it, and the
// domains' leases for its own node, and nothing else through those rights
// (the slice policy's channel rules, the lease policy), evaluated with
// Kubernetes' CEL; TestChart in test/e2e sends the same to the real API
// server. Without imex.channels the chart grants no lease right at all.
func TestIMEXChannelPolicies(t *testing.T) {
	const agent = "system:serviceaccount:" + ns + ":tessera"
	const node = "tray-1"
	if objs := render(t); len(helmchart.Find(objs, "Role", "tessera-imex-leases")) != 0 || len(helmchart.Find(objs, "ValidatingAdmissionPolicy", "tessera-imex-leases")) != 0 {
		t.Error("imex.channels=0 still grants leases")
	}
	objs := render(t, "imex.channels=64")
	role := one[rbacv1.Role](t, objs, "Role", "tessera-imex-leases")
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"leases"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get", "create", "update"}) {
		t.Errorf("lease role %+v", role.Rules)
	}
	_, c := daemonSet(t, objs)
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "TESSERA_IMEX_CHANNELS" && e.Value == "64" }) {
		t.Errorf("the agent is not told --imex-channels=64: %+v", c.Env)
	}

	slicePolicy := compilePolicy(t, one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-node-slices"))
	for _, tc := range channelcases.SliceCases() {
		s, err := channelcases.Slice(node, 64)
		if err != nil {
			t.Fatal(err)
		}
		tc.Change(s)
		for _, op := range []string{"CREATE", "UPDATE"} {
			var old runtime.Object
			if op == "UPDATE" {
				o, _ := channelcases.Slice("tray-2", 64)
				old = o
			}
			msg := slicePolicy.admitObject(t, agent, node, op, s, old)
			judge(t, op+" "+tc.Name, msg, tc.Message)
		}
	}
	own, _ := channelcases.Slice(node, 64)
	judge(t, "a channel slice deleted", slicePolicy.admitObject(t, agent, node, "DELETE", nil, own), "")
	// A node's own pool is judged as before: another node's stays closed.
	other := own.DeepCopy()
	other.Spec.Pool.Name, other.Spec.NodeSelector, other.Spec.NodeName = "tray-2", nil, ptr("tray-2")
	judge(t, "another node's pool", slicePolicy.admitObject(t, agent, node, "CREATE", other, nil), "only the ResourceSlices of its own node")

	leasePolicy := compilePolicy(t, one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-imex-leases"))
	for _, tc := range channelcases.LeaseCases() {
		for _, op := range []string{"CREATE", "UPDATE"} {
			l := tc.Lease(ns, node)
			var old runtime.Object
			if op == "UPDATE" {
				old = channelcases.Lease(ns, "tray-2")
			}
			judge(t, op+" "+tc.Name, leasePolicy.admitObject(t, agent, node, op, l, old), tc.Message)
		}
	}
	judge(t, "a lease deleted", leasePolicy.admitObject(t, agent, node, "DELETE", nil, channelcases.Lease(ns, node)), "never deletes a lease")
	judge(t, "a lease by a token of no node", leasePolicy.admitObject(t, agent, "", "CREATE", channelcases.Lease(ns, node), nil), "name no node")
	if !strings.HasPrefix(channelpool.LeaseName(channelcases.Domain), "tessera-imex-") {
		t.Error("the publisher's lease is not one the policy admits")
	}
}

// judge checks a policy's answer: admitted where want is "", else refused
// saying want.
func judge(t *testing.T, name, msg, want string) {
	t.Helper()
	switch {
	case want == "" && msg != "":
		t.Errorf("%s: denied (%s), want admitted", name, msg)
	case want != "" && !strings.Contains(msg, want):
		t.Errorf("%s: %q, want a refusal saying %q", name, msg, want)
	}
}
