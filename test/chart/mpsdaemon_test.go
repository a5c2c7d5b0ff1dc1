package chart

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/daemonpods"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

// TestMPSDaemonObjects: the daemons' ServiceAccount, the agent's Role on
// pods and the policy exist exactly with mps.daemons pod.
func TestMPSDaemonObjects(t *testing.T) {
	names := []string{"ServiceAccount/tessera-mps-daemon", "Role/tessera-mps-daemons", "RoleBinding/tessera-mps-daemons",
		"ValidatingAdmissionPolicy/tessera-mps-daemons", "ValidatingAdmissionPolicyBinding/tessera-mps-daemons"}
	for _, tc := range []struct {
		sets []string
		want []string
	}{
		{nil, names},
		{[]string{"mps.daemons=pod", "backend=sim"}, names},
		{[]string{"mps.daemons=process"}, nil},
		{[]string{"admissionPolicy.enabled=false"}, names[:3]},
	} {
		objs := render(t, tc.sets...)
		var got []string
		for _, k := range kinds(objs) {
			if strings.Contains(k, "mps-daemon") {
				got = append(got, k)
			}
		}
		want := append([]string(nil), tc.want...)
		if !reflect.DeepEqual(sortedCopy(got), sortedCopy(want)) {
			t.Errorf("%v: rendered %v, want %v", tc.sets, got, want)
		}
		_, c := daemonSet(t, objs)
		if _, ok := env(c)["TESSERA_MPS_DAEMON_IMAGE"]; ok != (len(tc.want) > 0) {
			t.Errorf("%v: TESSERA_MPS_DAEMON_IMAGE set: %v", tc.sets, ok)
		}
		if env(c)["POD_NAMESPACE"] != "fieldRef:metadata.namespace" {
			t.Errorf("%v: POD_NAMESPACE %q", tc.sets, env(c)["POD_NAMESPACE"])
		}
	}
	if _, err := chart(t).Render(ns, "mps.daemons=container"); err == nil || !strings.Contains(err.Error(), "mps.daemons must be pod or process") {
		t.Errorf("mps.daemons=container: %v", err)
	}

	objs := render(t)
	sa := one[corev1.ServiceAccount](t, objs, "ServiceAccount", "tessera-mps-daemon")
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken || sa.Namespace != ns {
		t.Errorf("daemon ServiceAccount %+v: want automountServiceAccountToken false in %s", sa, ns)
	}
	for _, o := range objs {
		if k := o.GetKind(); k == "RoleBinding" || k == "ClusterRoleBinding" {
			var b rbacv1.RoleBinding
			if err := helmchart.Convert(o, &b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Subjects {
				if s.Name == "tessera-mps-daemon" {
					t.Errorf("%s/%s binds the daemons' ServiceAccount, which has no rights", k, b.Name)
				}
			}
		}
	}
	role := one[rbacv1.Role](t, objs, "Role", "tessera-mps-daemons")
	if want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "delete", "get", "list", "watch"}}}; role.Namespace != ns || !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("Role in %q: %+v, want %+v", role.Namespace, role.Rules, want)
	}
	rb := one[rbacv1.RoleBinding](t, objs, "RoleBinding", "tessera-mps-daemons")
	if rb.Namespace != ns || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
		!reflect.DeepEqual(rb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tessera", Namespace: ns}}) {
		t.Errorf("RoleBinding %+v %+v", rb.RoleRef, rb.Subjects)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestMPSDaemonEnv: the agent's daemon flags per backend; the image is the
// one the agent's container runs.
func TestMPSDaemonEnv(t *testing.T) {
	for _, tc := range []struct {
		sets                  []string
		privileged, priorityC string
	}{
		{nil, "true", "system-node-critical"},
		{[]string{"backend=nvml"}, "true", "system-node-critical"},
		{[]string{"backend=amd"}, "false", "system-node-critical"},
		{[]string{"backend=sim"}, "false", "system-node-critical"},
		{[]string{"backend=sim", "mps.daemonPod.privileged=true", "mps.daemonPod.priorityClassName=mps-critical"}, "true", "mps-critical"},
		{[]string{"backend=nvml", "mps.daemonPod.privileged=false", "priorityClassName=gpu-critical"}, "false", "gpu-critical"},
		{[]string{"image.repository=registry.example/tessera", "image.tag=dev"}, "true", "system-node-critical"},
	} {
		objs := render(t, tc.sets...)
		_, c := daemonSet(t, objs)
		e := env(c)
		want := map[string]string{
			"TESSERA_MPS_DAEMONS":                "pod",
			"TESSERA_MPS_DAEMON_IMAGE":           c.Image,
			"TESSERA_MPS_DAEMON_SERVICE_ACCOUNT": "tessera-mps-daemon",
			"TESSERA_MPS_DAEMON_PRIVILEGED":      tc.privileged,
			"TESSERA_MPS_DAEMON_PRIORITY_CLASS":  tc.priorityC,
		}
		for k, v := range want {
			if e[k] != v {
				t.Errorf("%v: %s=%q, want %q", tc.sets, k, e[k], v)
			}
			if flag, ok := strings.CutPrefix(k, "TESSERA_"); ok && !agentFlags[strings.ToLower(strings.ReplaceAll(flag, "_", "-"))] {
				t.Errorf("%s sets no agent flag", k)
			}
		}
	}
}

// policy is a ValidatingAdmissionPolicy compiled with Kubernetes' own CEL
// environment (k8s.io/apiserver's base library set), its objects as
// untyped values: each expression must compile there, and evaluating it
// is the verdict the API server would give on these objects.
type policy struct {
	match       []cel.Program
	variables   []namedProgram
	validations []namedProgram
}

type namedProgram struct {
	name, message string
	prg           cel.Program
}

func compilePolicy(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy) *policy {
	t.Helper()
	base, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err := base.Extend(
		cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType), cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	prog := func(what, expr string) cel.Program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s %q: %v", what, expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatalf("%s %q: %v", what, expr, err)
		}
		return prg
	}
	out := &policy{}
	for _, m := range p.Spec.MatchConditions {
		out.match = append(out.match, prog("matchCondition "+m.Name, m.Expression))
	}
	for _, v := range p.Spec.Variables {
		out.variables = append(out.variables, namedProgram{name: v.Name, prg: prog("variable "+v.Name, v.Expression)})
	}
	for _, v := range p.Spec.Validations {
		if v.Message == "" && v.MessageExpression == "" {
			t.Errorf("validation %q has no message", v.Expression)
		}
		np := namedProgram{name: v.Expression, message: v.Message, prg: prog("validation", v.Expression)}
		if v.MessageExpression != "" {
			prog("messageExpression", v.MessageExpression)
			np.message = v.MessageExpression
		}
		out.validations = append(out.validations, np)
	}
	return out
}

// admit evaluates p: "" when allowed (or not matched), else the message of
// the first validation that fails.
func (p *policy) admit(t *testing.T, user, node, op string, object, oldObject *corev1.Pod) string {
	t.Helper()
	return p.admitObject(t, user, node, op, podOrNil(object), podOrNil(oldObject))
}

// podOrNil keeps a nil pod a nil object, not an object holding nil.
func podOrNil(p *corev1.Pod) runtime.Object {
	if p == nil {
		return nil
	}
	return p
}

// admitObject is admit for any kind of object; nil for none.
func (p *policy) admitObject(t *testing.T, user, node, op string, object, oldObject runtime.Object) string {
	t.Helper()
	toMap := func(obj runtime.Object) any {
		if obj == nil {
			return nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	userInfo := map[string]any{"username": user}
	if node != "" {
		userInfo["extra"] = map[string]any{"authentication.kubernetes.io/node-name": []any{node}}
	}
	vars := map[string]any{}
	act := map[string]any{
		"object": toMap(object), "oldObject": toMap(oldObject),
		"request":   map[string]any{"operation": op, "userInfo": userInfo},
		"variables": vars,
	}
	for _, m := range p.match {
		v, _, err := m.Eval(act)
		if err != nil {
			t.Fatalf("matchCondition: %v", err)
		}
		if v.Value() != true {
			return ""
		}
	}
	for _, v := range p.variables {
		val, _, err := v.prg.Eval(act)
		if err != nil {
			t.Fatalf("variable %s: %v", v.name, err)
		}
		vars[v.name] = val.Value()
	}
	for _, v := range p.validations {
		val, _, err := v.prg.Eval(act)
		if err != nil {
			return "error: " + err.Error() + " in " + v.name
		}
		if val.Value() != true {
			return v.message
		}
	}
	return ""
}

// TestMPSDaemonPolicy evaluates the rendered policy with Kubernetes' CEL
// on the pods the agent's launcher really creates (legacy MPS and MPS v3),
// and on every hostile variant of daemonpods.Hostile: each refused, with a
// message that names what it must not do.
func TestMPSDaemonPolicy(t *testing.T) {
	const agent = "system:serviceaccount:" + ns + ":tessera"
	const node = "gpu-1"
	for _, backend := range []struct {
		sets []string
		root string
	}{
		{nil, "/var/run/tessera/mps"},
		{[]string{"backend=sim"}, "/var/run/tessera/sim/" + node + "/mps"},
		{[]string{"backend=sim", "sim.stateDir=/srv/sim"}, "/srv/sim/mps"},
		{[]string{"backend=nvml", "mps.root=/run/mps"}, "/run/mps"},
		{[]string{"backend=nvml", "mps.daemonPod.privileged=false"}, "/var/run/tessera/mps"},
		// Driver roots: the GPU Operator's, none, and the sim's stand-in
		// from the host (the default above is the host's /).
		{[]string{"nvidiaDriverRoot=/run/nvidia/driver"}, "/var/run/tessera/mps"},
		{[]string{"backend=nvml", "nvidiaDriverRoot="}, "/var/run/tessera/mps"},
		{[]string{"backend=sim", "sim.driverRoot=/var/lib/tessera/sim-driver"}, "/var/run/tessera/sim/" + node + "/mps"},
	} {
		t.Run(strings.Join(append([]string{"defaults"}, backend.sets...), ","), func(t *testing.T) {
			objs := render(t, backend.sets...)
			p := compilePolicy(t, one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-mps-daemons"))
			vapb := one[admissionv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding", "tessera-mps-daemons")
			if vapb.Spec.PolicyName != "tessera-mps-daemons" || !reflect.DeepEqual(vapb.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
				t.Errorf("binding %+v", vapb.Spec)
			}
			_, c := daemonSet(t, objs)
			e := env(c)
			privileged := e["TESSERA_MPS_DAEMON_PRIVILEGED"] == "true"
			var good *corev1.Pod
			for _, v3 := range []bool{false, true} {
				pod, err := daemonpods.Of(e, ns, node, backend.root, v3)
				if err != nil {
					t.Fatal(err)
				}
				if msg := p.admit(t, agent, node, "CREATE", pod, nil); msg != "" {
					t.Fatalf("the launcher's own pod (MPS v3 %v, command %q) is denied: %s", v3, pod.Spec.Containers[0].Command, msg)
				}
				if msg := p.admit(t, agent, node, "DELETE", nil, pod); msg != "" {
					t.Errorf("delete of the node's daemon pod denied: %s", msg)
				}
				good = pod
			}
			// Each hostile variant, created by the agent of node; then what
			// depends on who asks and how.
			type request struct {
				daemonpods.Case
				op, user, node string
			}
			var reqs []request
			for _, c := range daemonpods.Hostile(good, backend.root, privileged, "other") {
				reqs = append(reqs, request{Case: c})
			}
			change := func(f func(*corev1.Pod)) *corev1.Pod {
				pod := good.DeepCopy()
				f(pod)
				return pod
			}
			reqs = append(reqs,
				request{Case: daemonpods.Case{Name: "no node name", Pod: change(func(p *corev1.Pod) { p.Spec.NodeName = "" }), Field: "spec.nodeName"}},
				request{Case: daemonpods.Case{Name: "token names no node", Pod: good, Field: "node-name"}, node: "-"},
				request{Case: daemonpods.Case{Name: "someone else's request", Pod: change(func(p *corev1.Pod) { p.Spec.HostPID = true })}, user: "system:serviceaccount:other:x"},
				request{Case: daemonpods.Case{Name: "delete on another node", Pod: change(func(p *corev1.Pod) { p.Spec.NodeName = "gpu-2" }), Field: "spec.nodeName"}, op: "DELETE"},
				request{Case: daemonpods.Case{Name: "delete of another pod", Pod: change(func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }), Field: "metadata.labels"}, op: "DELETE"},
				request{Case: daemonpods.Case{Name: "delete of a hostPID daemon", Pod: change(func(p *corev1.Pod) { p.Spec.HostPID = true })}, op: "DELETE"},
			)
			for _, tc := range reqs {
				op, user, tok := tc.op, tc.user, tc.node
				if op == "" {
					op = "CREATE"
				}
				if user == "" {
					user = agent
				}
				if tok == "" {
					tok = node
				} else if tok == "-" {
					tok = ""
				}
				var msg string
				if op == "CREATE" {
					msg = p.admit(t, user, tok, op, tc.Pod, nil)
				} else {
					msg = p.admit(t, user, tok, op, nil, tc.Pod)
				}
				switch {
				case tc.Field == "" && msg != "":
					t.Errorf("%s: denied: %s", tc.Name, msg)
				case tc.Field != "" && msg == "":
					t.Errorf("%s: allowed", tc.Name)
				case tc.Field != "" && (!strings.Contains(msg, tc.Field) || !strings.HasPrefix(msg, "tessera:") && !strings.HasPrefix(msg, "'tessera:")):
					t.Errorf("%s: message %q does not name %s", tc.Name, msg, tc.Field)
				}
			}
		})
	}
}
