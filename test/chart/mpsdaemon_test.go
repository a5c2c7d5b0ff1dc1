package chart

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/pkg/mps"
	"github.com/tessera-gpu/tessera/pkg/mps/daemonpod"
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
	toMap := func(pod *corev1.Pod) any {
		if pod == nil {
			return nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
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

// daemonPodOf is the pod the agent's launcher (pkg/mps/daemonpod) creates
// with the flags the chart sets, for a daemon under root.
func daemonPodOf(t *testing.T, e map[string]string, node, root string) *corev1.Pod {
	t.Helper()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	l, err := daemonpod.New(daemonpod.Config{
		Client: client, Namespace: ns, NodeName: node, Image: e["TESSERA_MPS_DAEMON_IMAGE"],
		ServiceAccount: e["TESSERA_MPS_DAEMON_SERVICE_ACCOUNT"], Privileged: e["TESSERA_MPS_DAEMON_PRIVILEGED"] == "true",
		PriorityClassName: e["TESSERA_MPS_DAEMON_PRIORITY_CLASS"],
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := root + "/claim-1"
	h, err := l.Launch(context.Background(), mps.Launch{
		ID: "claim-1", Argv: []string{"nvidia-cuda-mps-control", "-f"}, Dir: dir,
		Env: map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-1", "CUDA_MPS_PIPE_DIRECTORY": dir + "/pipe", mps.EnvDaemonID: "claim-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, name, _ := strings.Cut(h.Pod, "/")
	pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestMPSDaemonPolicy evaluates the rendered policy with Kubernetes' CEL
// on the pod the agent's launcher really creates, and on that pod with one
// field changed.
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
			good := daemonPodOf(t, e, node, backend.root)
			if msg := p.admit(t, agent, node, "CREATE", good, nil); msg != "" {
				t.Fatalf("the launcher's own pod is denied: %s", msg)
			}
			if msg := p.admit(t, agent, node, "DELETE", nil, good); msg != "" {
				t.Errorf("delete of the node's daemon pod denied: %s", msg)
			}
			change := func(f func(*corev1.Pod)) *corev1.Pod {
				pod := good.DeepCopy()
				f(pod)
				return pod
			}
			ctr := func(f func(*corev1.Container)) func(*corev1.Pod) {
				return func(p *corev1.Pod) { f(&p.Spec.Containers[0]) }
			}
			for _, tc := range []struct {
				name  string
				op    string
				user  string
				node  string
				pod   *corev1.Pod
				field string // in the message; "" = allowed
			}{
				{name: "another node", pod: change(func(p *corev1.Pod) { p.Spec.NodeName = "gpu-2" }), field: "spec.nodeName"},
				{name: "no node name", pod: change(func(p *corev1.Pod) { p.Spec.NodeName = "" }), field: "spec.nodeName"},
				{name: "token names no node", node: "-", pod: good, field: "node-name"},
				{name: "no daemon label", pod: change(func(p *corev1.Pod) { delete(p.Labels, "app.kubernetes.io/name") }), field: "metadata.labels"},
				{name: "another service account", pod: change(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "tessera" }), field: "spec.serviceAccountName"},
				{name: "token mounted", pod: change(func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil }), field: "spec.automountServiceAccountToken"},
				{name: "hostPID", pod: change(func(p *corev1.Pod) { p.Spec.HostPID = true }), field: "spec.hostPID"},
				{name: "hostNetwork", pod: change(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), field: "spec.hostNetwork"},
				{name: "hostIPC", pod: change(func(p *corev1.Pod) { p.Spec.HostIPC = true }), field: "spec.hostIPC"},
				{name: "wrong image", pod: change(ctr(func(c *corev1.Container) { c.Image = "busybox" })), field: "image"},
				{name: "two containers", pod: change(func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) }), field: "spec.containers"},
				{name: "init container", pod: change(func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "busybox"}} }), field: "spec.initContainers"},
				{name: "ephemeral container", pod: change(func(p *corev1.Pod) {
					p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Image: "busybox"}}}
				}), field: "spec.ephemeralContainers"},
				{name: "host root", pod: change(func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = "/" }), field: "spec.volumes"},
				{name: "the MPS root itself", pod: change(func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = backend.root }), field: "spec.volumes"},
				{name: "out of the root by ..", pod: change(func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = backend.root + "/../../../etc" }), field: "spec.volumes"},
				{name: "a sibling of the root", pod: change(func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = backend.root + "x/claim-1" }), field: "spec.volumes"},
				{name: "an emptyDir", pod: change(func(p *corev1.Pod) {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
				}), field: "spec.volumes"},
				{name: "a resource claim", pod: change(func(p *corev1.Pod) {
					p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("c")}}
				}), field: "spec.resourceClaims"},
				{name: "added capability", pod: change(ctr(func(c *corev1.Container) {
					if c.SecurityContext.Capabilities == nil {
						c.SecurityContext.Capabilities = &corev1.Capabilities{}
					}
					c.SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
				})), field: "capabilities.add"},
				{name: "privileged", pod: change(ctr(func(c *corev1.Container) { c.SecurityContext.Privileged = ptr(true) })), field: map[bool]string{true: "", false: "privileged"}[privileged]},
				{name: "someone else's request", user: "system:serviceaccount:other:x", pod: change(func(p *corev1.Pod) { p.Spec.HostPID = true })},
				{name: "delete on another node", op: "DELETE", pod: change(func(p *corev1.Pod) { p.Spec.NodeName = "gpu-2" }), field: "spec.nodeName"},
				{name: "delete of another pod", op: "DELETE", pod: change(func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }), field: "metadata.labels"},
				{name: "delete of a hostPID daemon", op: "DELETE", pod: change(func(p *corev1.Pod) { p.Spec.HostPID = true })},
			} {
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
					msg = p.admit(t, user, tok, op, tc.pod, nil)
				} else {
					msg = p.admit(t, user, tok, op, nil, tc.pod)
				}
				switch {
				case tc.field == "" && msg != "":
					t.Errorf("%s: denied: %s", tc.name, msg)
				case tc.field != "" && msg == "":
					t.Errorf("%s: allowed", tc.name)
				case tc.field != "" && (!strings.Contains(msg, tc.field) || !strings.HasPrefix(msg, "tessera:") && !strings.HasPrefix(msg, "'tessera:")):
					t.Errorf("%s: message %q does not name %s", tc.name, msg, tc.field)
				}
			}
		})
	}
}
