// Package chart lints and renders the Helm chart deployments/helm/tessera
// with the real helm (built by hack/build-cluster-bins.sh) for the default
// values and each documented option, and checks what it renders. It needs no
// cluster; test/e2e applies the rendered RBAC and policy to one.
package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

const ns = "tessera-system"

var repo = func() string {
	r, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return r
}()

func chart(t *testing.T) *helmchart.Chart {
	t.Helper()
	c, err := helmchart.ForRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func render(t *testing.T, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := chart(t).Render(ns, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// one returns the single object of kind and name, typed.
func one[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	found := helmchart.Find(objs, kind, name)
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s named %q, want 1", len(found), kind, name)
	}
	var v T
	if err := helmchart.Convert(found[0], &v); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return &v
}

func daemonSet(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.DaemonSet, *corev1.Container) {
	t.Helper()
	ds := one[appsv1.DaemonSet](t, objs, "DaemonSet", "tessera")
	if n := len(ds.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers, want 1", n)
	}
	return ds, &ds.Spec.Template.Spec.Containers[0]
}

func env(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			m[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
			continue
		}
		m[e.Name] = e.Value
	}
	return m
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

var allClasses = map[string]string{
	"gpu":    "gpu.tessera.dev",
	"nvidia": "nvidia.gpu.tessera.dev",
	"amd":    "amd.gpu.tessera.dev",
	"mig":    "mig.gpu.tessera.dev",
	"xcp":    "xcp.gpu.tessera.dev",
	"imex":   "imex.gpu.tessera.dev",
	"vfio":   "vfio.gpu.tessera.dev",
}

func TestLint(t *testing.T) {
	c := chart(t)
	for _, sets := range optionSets {
		t.Run(strings.Join(append([]string{"defaults"}, sets...), ","), func(t *testing.T) {
			out, err := c.Lint(sets...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// optionSets: each documented option, as the --set values of one render.
var optionSets = [][]string{
	nil,
	{"deviceClasses.gpu=false"},
	{"deviceClasses.nvidia=false"},
	{"deviceClasses.amd=false"},
	{"deviceClasses.mig=false"},
	{"deviceClasses.xcp=false"},
	{"deviceClasses.vfio=false"},
	{"passthrough.enabled=true"},
	{"passthrough.enabled=true", "backend=amd"},
	{"serviceMonitor.enabled=true"},
	{"prometheusRule.enabled=true", "prometheusRule.force=true", "prometheusRule.labels.release=prom"},
	{"networkPolicy.enabled=true"},
	{"nodeGroups[0].name=dynamic", "nodeGroups[0].nodeSelector.mode=dynamic", "nodeGroups[0].partitioning=dynamic",
		"nodeGroups[1].name=shared", "nodeGroups[1].nodeSelector.mode=shared", "nodeGroups[1].sharing=capacity"},
	{"networkPolicy.enabled=true", "hostNetwork=true"},
	{"backend=nvml"},
	{"backend=amd", "privileged=false"},
	{"backend=sim"},
	{"backend=sim", "sim.profile=l4-4", "sim.stateDir=/srv/sim"},
	{"mps.daemons=process"},
	{"backend=sim", "mps.daemonPod.privileged=true", "mps.daemonPod.priorityClassName=mps-critical"},
	{"partitioning=dynamic"},
	{"logging.format=json", "logging.verbosity=5"},
	{"metrics.port=9555"},
	{"metrics.enabled=false", "serviceMonitor.enabled=true"},
	{"metrics.auth.enabled=false", "attribution.poll=0", "serviceMonitor.enabled=true"},
	{"metrics.auth.enabled=false", "networkPolicy.enabled=true", `networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring`},
	{"metrics.auth.scraperServiceAccounts[0].name=prometheus-k8s", "metrics.auth.scraperServiceAccounts[0].namespace=monitoring"},
	{"metrics.tls.existingSecret=agent-metrics-tls", "metrics.tls.serverName=agents.example", "serviceMonitor.enabled=true"},
	{"serviceMonitor.enabled=true", "serviceMonitor.bearerTokenSecret.name=prometheus-token", "serviceMonitor.bearerTokenSecret.key=token"},
	{"admissionPolicy.enabled=false"},
	{"hostNetwork=true"},
	{"kubeletDir=/var/lib/k0s/kubelet"},
	{"attribution.poll=0"},
	{"telemetry.poll=0"},
	{"serviceAccount.name=gpu-agent"},
	{"image.repository=registry.example/tessera", "image.tag=dev", "image.pullPolicy=Always"},
	{"sysfsRoot=/host", "kubeAPI.qps=20", "kubeAPI.burst=40"},
	{"cdi.dir=/run/cdi", "cdi.vendorDirs={/etc/cdi,/run/cdi}"},
	{"webhook.enabled=false"},
	{"webhook.certManager.enabled=true"},
	{"webhook.certManager.enabled=true", "webhook.certManager.issuerRef.kind=ClusterIssuer", "webhook.certManager.issuerRef.name=ca"},
	{"webhook.replicas=3", "webhook.port=8443", "webhook.timeoutSeconds=10"},
	{"webhook.image.repository=registry.example/webhook", "webhook.image.tag=dev", "webhook.image.pullPolicy=Always"},
	{"webhook.nodeSelector.role=infra", "webhook.tolerations[0].operator=Exists", "webhook.podAnnotations.a=b"},
}

func TestEveryOptionRenders(t *testing.T) {
	for _, sets := range optionSets {
		objs := render(t, sets...)
		want := 1 // one per node group where there are groups
		if groups := len(slices.DeleteFunc(slices.Clone(sets), func(s string) bool { return !strings.HasSuffix(strings.SplitN(s, "=", 2)[0], "].name") })); groups > 0 {
			want = groups
		}
		if n := len(helmchart.Find(objs, "DaemonSet", "")); n != want {
			t.Errorf("%v: %d DaemonSets, want %d: %v", sets, n, want, kinds(objs))
		}
	}
}

func TestDefaults(t *testing.T) {
	objs := render(t)
	want := []string{
		"ClusterRole/tessera",
		"ClusterRole/tessera-metrics-reader",
		"ClusterRoleBinding/tessera",
		"DaemonSet/tessera",
		"Deployment/tessera-webhook",
		"DeviceClass/amd.gpu.tessera.dev",
		"DeviceClass/gpu.tessera.dev",
		"DeviceClass/imex.gpu.tessera.dev",
		"DeviceClass/mig.gpu.tessera.dev",
		"DeviceClass/nvidia.gpu.tessera.dev",
		"DeviceClass/vfio.gpu.tessera.dev",
		"DeviceClass/xcp.gpu.tessera.dev",
		"PodDisruptionBudget/tessera-webhook",
		"Role/tessera-mps-daemons",
		"RoleBinding/tessera-mps-daemons",
		"Secret/tessera-webhook-tls",
		"Service/tessera-metrics",
		"Service/tessera-webhook",
		"ServiceAccount/tessera",
		"ServiceAccount/tessera-mps-daemon",
		"ValidatingAdmissionPolicy/tessera-mps-daemons",
		"ValidatingAdmissionPolicy/tessera-node-label",
		"ValidatingAdmissionPolicy/tessera-node-slices",
		"ValidatingAdmissionPolicyBinding/tessera-mps-daemons",
		"ValidatingAdmissionPolicyBinding/tessera-node-label",
		"ValidatingAdmissionPolicyBinding/tessera-node-slices",
		"ValidatingWebhookConfiguration/tessera-webhook",
	}
	if got := kinds(objs); !reflect.DeepEqual(got, want) {
		t.Fatalf("rendered\n%v\nwant\n%v", got, want)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "DaemonSet", "Service", "Deployment", "Secret", "Role", "RoleBinding":
			if o.GetNamespace() != ns {
				t.Errorf("%s/%s in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
			}
		}
	}

	ds, c := daemonSet(t, objs)
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != "tessera" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	if pod.HostNetwork {
		t.Error("hostNetwork by default")
	}
	if c.Image != "ghcr.io/tessera-gpu/tessera-kubelet-plugin:0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	}
	if want := []string{"-v=0", "--logging-format=text"}; !reflect.DeepEqual(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	wantEnv := map[string]string{
		"NODE_NAME":                          "fieldRef:spec.nodeName",
		"POD_NAMESPACE":                      "fieldRef:metadata.namespace",
		"TESSERA_MPS_DAEMONS":                "pod",
		"TESSERA_NVIDIA_DRIVER_ROOT":         "/",
		"TESSERA_NVIDIA_DRIVER_ROOT_MOUNT":   "/driver-root",
		"TESSERA_MPS_DAEMON_IMAGE":           "ghcr.io/tessera-gpu/tessera-kubelet-plugin:0.1.0",
		"TESSERA_MPS_DAEMON_SERVICE_ACCOUNT": "tessera-mps-daemon",
		"TESSERA_MPS_DAEMON_PRIVILEGED":      "true",
		"TESSERA_MPS_DAEMON_PRIORITY_CLASS":  "system-node-critical",
		"TESSERA_BACKEND":                    "auto",
		"TESSERA_SYSFS_ROOT":                 "/",
		"TESSERA_PASSTHROUGH":                "false",
		"TESSERA_PARTITIONING":               "static",
		"TESSERA_SHARING":                    "none",
		"TESSERA_MIN_SHARE_ISOLATION":        "none",
		"TESSERA_LEGACY_MPS_SHARES":          "whole",
		"TESSERA_KUBE_API_QPS":               "200",
		"TESSERA_KUBE_API_BURST":             "400",
		"TESSERA_PLUGIN_DATA_DIR":            "/var/lib/kubelet/plugins/gpu.tessera.dev",
		"TESSERA_REGISTRAR_DIR":              "/var/lib/kubelet/plugins_registry",
		"TESSERA_CDI_DIR":                    "/var/run/cdi",
		"TESSERA_DYNAMIC_WINDOW":             "2",
		"TESSERA_VENDOR_CDI_DIRS":            "/etc/cdi,/var/run/cdi",
		"TESSERA_METRICS_ADDRESS":            ":9478",
		"TESSERA_METRICS_AUTH":               "true",
		"TESSERA_MPS_ROOT":                   "/var/run/tessera/mps",
		"TESSERA_HEALTH_XID_POLICY":          "",
		"TESSERA_HEALTH_WINDOW":              "10m",
		"TESSERA_HEALTH_CORRECTED_THRESHOLD": "10",
		"TESSERA_HEALTH_POLL":                "30s",
		"TESSERA_ATTRIBUTION_POLL":           "10s",
		"TESSERA_POD_RESOURCES_SOCKET":       "/var/lib/kubelet/pod-resources/kubelet.sock",
		"TESSERA_TELEMETRY_POLL":             "10s",
	}
	if got := env(c); !reflect.DeepEqual(got, wantEnv) {
		t.Errorf("env\n%v\nwant\n%v", got, wantEnv)
	}
	// Every TESSERA_ variable names a flag of the agent.
	for name := range wantEnv {
		if flag, ok := strings.CutPrefix(name, "TESSERA_"); ok && !agentFlags[strings.ToLower(strings.ReplaceAll(flag, "_", "-"))] {
			t.Errorf("%s sets no agent flag", name)
		}
	}

	// Host paths: what the agent writes read-write, the rest read-only.
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath == nil {
			t.Errorf("volume %s is not a hostPath", v.Name)
			continue
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		// The driver root is the one mounted elsewhere: its flag says both.
		if hostPaths[m.Name] != m.MountPath && m.Name != "driver-root" {
			t.Errorf("mount %s: host %s at %s; the agent's flags name host paths", m.Name, hostPaths[m.Name], m.MountPath)
		}
		mounts[m.MountPath] = mode
	}
	wantMounts := map[string]string{
		"/var/lib/kubelet/plugins/gpu.tessera.dev": "rw",
		"/var/lib/kubelet/plugins_registry":        "rw",
		"/var/run/cdi":                             "rw",
		"/etc/cdi":                                 "ro",
		"/dev":                                     "ro",
		"/sys":                                     "ro",
		"/var/run/tessera/mps":                     "rw",
		"/var/lib/kubelet/pod-resources":           "ro",
		"/driver-root":                             "ro",
	}
	if !reflect.DeepEqual(mounts, wantMounts) {
		t.Errorf("mounts\n%v\nwant\n%v", mounts, wantMounts)
	}
	// The security context of each backend: TestSecurityContext.
	// The runtime creates the termination message file as a mount point:
	// never under the host's /dev, which is mounted read-only (the
	// containerd e2e saw the container fail to start there).
	if p := c.TerminationMessagePath; p == "" || p == "/dev" || strings.HasPrefix(p, "/dev/") {
		t.Errorf("terminationMessagePath %q is under the read-only host /dev", p)
	}
	for name, want := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}} {
		if p := want.p; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want.path || p.HTTPGet.Port.String() != "9478" {
			t.Errorf("%s probe %+v: want GET %s on port metrics", name, want.p, want.path)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9478 {
		t.Errorf("ports %+v", c.Ports)
	}

	svc := one[corev1.Service](t, objs, "Service", "tessera-metrics")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9478 || svc.Spec.Ports[0].TargetPort.String() != "9478" {
		t.Errorf("service ports %+v", svc.Spec.Ports)
	}
	for k, v := range svc.Spec.Selector {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("service selector %s=%s does not select the agent pods", k, v)
		}
	}
}

// agentFlags: the agent's flags, from internal/agent/config.go.
var agentFlags = flagsOf("internal/agent/config.go")

// flagsOf reads the flag names a Config.AddFlags in file registers.
func flagsOf(file string) map[string]bool {
	data, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		panic(err)
	}
	m := map[string]bool{}
	for _, s := range regexp.MustCompile(`fs\.\w+Var\(&c\.\w+, "([a-z-]+)"`).FindAllStringSubmatch(string(data), -1) {
		m[s[1]] = true
	}
	return m
}

// TestClusterRole: exactly what the agent calls, nothing more (see
// templates/rbac.yaml for where each call is): the token and access
// reviews only while it authenticates /metrics.
func TestClusterRole(t *testing.T) {
	base := []rbacv1.PolicyRule{
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/driver"}, ResourceNames: []string{"gpu.tessera.dev"}, Verbs: []string{"associated-node:patch"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
	}
	reviews := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	for _, tc := range []struct {
		sets []string
		want []rbacv1.PolicyRule
	}{
		{nil, append(slices.Clone(base), reviews...)},
		{[]string{"metrics.auth.enabled=false", "attribution.poll=0"}, base},
		{[]string{"metrics.enabled=false"}, base},
	} {
		cr := one[rbacv1.ClusterRole](t, render(t, tc.sets...), "ClusterRole", "tessera")
		if !reflect.DeepEqual(cr.Rules, tc.want) {
			t.Errorf("%v: rules\n%+v\nwant\n%+v", tc.sets, cr.Rules, tc.want)
		}
	}
	objs := render(t)
	crb := one[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "tessera")
	if crb.RoleRef.Name != "tessera" || crb.RoleRef.Kind != "ClusterRole" ||
		!reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tessera", Namespace: ns}}) {
		t.Errorf("binding %+v %+v", crb.RoleRef, crb.Subjects)
	}
}

func TestAdmissionPolicy(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		sa   string
	}{
		{nil, "tessera"},
		{[]string{"serviceAccount.name=gpu-agent"}, "gpu-agent"},
	} {
		objs := render(t, tc.sets...)
		p := one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-node-slices")
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Fail {
			t.Errorf("failurePolicy %v", p.Spec.FailurePolicy)
		}
		user := "system:serviceaccount:" + ns + ":" + tc.sa
		if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != `request.userInfo.username == "`+user+`"` {
			t.Errorf("matchConditions %+v, want only the user %s", p.Spec.MatchConditions, user)
		}
		rules := p.Spec.MatchConstraints.ResourceRules
		if len(rules) != 1 || !reflect.DeepEqual(rules[0].Resources, []string{"resourceslices"}) ||
			!reflect.DeepEqual(rules[0].Operations, []admissionv1.OperationType{"CREATE", "UPDATE", "DELETE"}) {
			t.Errorf("resourceRules %+v", rules)
		}
		var all string
		for _, v := range p.Spec.Validations {
			all += v.Expression + "\n"
		}
		for _, want := range []string{"variables.nodeName != ''", "object.spec.nodeName == variables.nodeName", "oldObject.spec.nodeName == variables.nodeName",
			"object.spec.driver == 'gpu.tessera.dev' && object.spec.pool.name == variables.nodeName",
			"oldObject.spec.driver == 'gpu.tessera.dev' && oldObject.spec.pool.name == variables.nodeName"} {
			if !strings.Contains(all, want) {
				t.Errorf("validations lack %q:\n%s", want, all)
			}
		}
		b := one[admissionv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding", "tessera-node-slices")
		if b.Spec.PolicyName != p.Name || !reflect.DeepEqual(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
			t.Errorf("binding %+v", b.Spec)
		}
		crb := one[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "tessera")
		sa := one[corev1.ServiceAccount](t, objs, "ServiceAccount", tc.sa)
		ds, _ := daemonSet(t, objs)
		if crb.Subjects[0].Name != tc.sa || sa.Name != tc.sa || ds.Spec.Template.Spec.ServiceAccountName != tc.sa {
			t.Errorf("service account %s not used throughout", tc.sa)
		}
	}
	if objs := render(t, "admissionPolicy.enabled=false"); len(helmchart.Find(objs, "ValidatingAdmissionPolicy", ""))+len(helmchart.Find(objs, "ValidatingAdmissionPolicyBinding", "")) != 0 {
		t.Errorf("admissionPolicy.enabled=false still renders the policy: %v", kinds(objs))
	}
}

// TestDeviceClassesMatchFile keeps the chart's classes and
// internal/deviceclasses/deviceclasses.yaml (which the local cluster
// applies) from drifting apart.
func TestDeviceClassesMatchFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo, "internal/deviceclasses/deviceclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := helmchart.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	specs := func(objs []*unstructured.Unstructured) map[string]resourceapi.DeviceClassSpec {
		m := map[string]resourceapi.DeviceClassSpec{}
		for _, o := range helmchart.Find(objs, "DeviceClass", "") {
			var dc resourceapi.DeviceClass
			if err := helmchart.Convert(o, &dc); err != nil {
				t.Fatal(err)
			}
			if o.GetAPIVersion() != "resource.k8s.io/v1" {
				t.Errorf("%s: apiVersion %s", dc.Name, o.GetAPIVersion())
			}
			m[dc.Name] = dc.Spec
		}
		return m
	}
	file, chartClasses := specs(fromFile), specs(render(t))
	if len(file) != len(allClasses) {
		t.Fatalf("the file has %d classes, the chart knows %d", len(file), len(allClasses))
	}
	if !reflect.DeepEqual(file, chartClasses) {
		a, _ := json.MarshalIndent(file, "", "  ")
		b, _ := json.MarshalIndent(chartClasses, "", "  ")
		t.Errorf("the chart's DeviceClasses differ from deviceclasses.yaml\nfile:\n%s\nchart:\n%s", a, b)
	}
}

func TestEachDeviceClassSwitches(t *testing.T) {
	for value, name := range allClasses {
		objs := render(t, "deviceClasses."+value+"=false")
		for _, other := range allClasses {
			n := len(helmchart.Find(objs, "DeviceClass", other))
			if want := map[bool]int{true: 0, false: 1}[other == name]; n != want {
				t.Errorf("deviceClasses.%s=false: %d of %s, want %d", value, n, other, want)
			}
		}
	}
}

func TestOptions(t *testing.T) {
	t.Run("networkPolicy", func(t *testing.T) {
		if n := len(helmchart.Find(render(t), "NetworkPolicy", "")); n != 0 {
			t.Errorf("%d NetworkPolicies by default", n)
		}
		objs := render(t, "networkPolicy.enabled=true")
		np := one[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "tessera")
		ds, _ := daemonSet(t, objs)
		for k, v := range np.Spec.PodSelector.MatchLabels {
			if ds.Spec.Template.Labels[k] != v {
				t.Errorf("pod selector %s=%s does not select the agent's pods", k, v)
			}
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 1 {
			t.Fatalf("policy %+v, want one ingress rule", np.Spec)
		}
		in := np.Spec.Ingress[0]
		if len(in.Ports) != 1 || in.Ports[0].Port == nil || in.Ports[0].Port.String() != "metrics" {
			t.Errorf("ports %+v, want only the metrics port", in.Ports)
		}
		if len(in.From) != 1 || in.From[0].PodSelector == nil || in.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
			t.Errorf("from %+v, want the Prometheus pods", in.From)
		}
		if n := len(helmchart.Find(render(t, "networkPolicy.enabled=true", "hostNetwork=true"), "NetworkPolicy", "")); n != 0 {
			t.Errorf("%d NetworkPolicies for a host-network agent", n)
		}
		if _, err := chart(t).Render(ns, "networkPolicy.enabled=true", "networkPolicy.metricsFrom=null"); err == nil || !strings.Contains(err.Error(), "networkPolicy.metricsFrom is empty") {
			t.Errorf("an empty metricsFrom (which would admit everyone): %v, want the render refused", err)
		}
	})
	t.Run("serviceMonitor", func(t *testing.T) {
		if n := len(helmchart.Find(render(t), "ServiceMonitor", "")); n != 0 {
			t.Errorf("%d ServiceMonitors by default", n)
		}
		objs := render(t, "serviceMonitor.enabled=true", "serviceMonitor.interval=15s", "serviceMonitor.labels.release=prom")
		sm := helmchart.Find(objs, "ServiceMonitor", "tessera")
		if len(sm) != 1 || sm[0].GetAPIVersion() != "monitoring.coreos.com/v1" || sm[0].GetLabels()["release"] != "prom" {
			t.Fatalf("ServiceMonitor: %v", kinds(objs))
		}
		eps, _, _ := unstructured.NestedSlice(sm[0].Object, "spec", "endpoints")
		ep, _ := eps[0].(map[string]any)
		// honorLabels: tessera_device_allocation_info's namespace, pod and
		// container are the tenant's, not the agent pod's target labels.
		if len(eps) != 1 || ep["port"] != "metrics" || ep["path"] != "/metrics" || ep["interval"] != "15s" || ep["honorLabels"] != true {
			t.Errorf("endpoints %v", eps)
		}
		sel, _, _ := unstructured.NestedStringMap(sm[0].Object, "spec", "selector", "matchLabels")
		svc := one[corev1.Service](t, objs, "Service", "tessera-metrics")
		for k, v := range sel {
			if svc.Labels[k] != v {
				t.Errorf("ServiceMonitor selector %s=%s does not select the metrics Service", k, v)
			}
		}
	})
	t.Run("backend", func(t *testing.T) {
		for _, b := range []string{"nvml", "amd", "sim", "auto"} {
			ds, c := daemonSet(t, render(t, "backend="+b))
			if got := env(c)["TESSERA_BACKEND"]; got != b {
				t.Errorf("backend=%s: TESSERA_BACKEND=%s", b, got)
			}
			hasSim := slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "sim-state" })
			if hasSim != (b == "sim") {
				t.Errorf("backend=%s: sim state volume %v", b, hasSim)
			}
		}
		// backend=sim: the machine and the state directory, mounted at the
		// path the agent is told (its CDI specs name device nodes there).
		for _, tc := range []struct {
			sets             []string
			profile, dir, at string
		}{
			{[]string{"backend=sim"}, "dgx-h100", "", "/var/run/tessera"},
			{[]string{"backend=sim", "sim.profile=l4-4", "sim.stateDir=/srv/sim"}, "l4-4", "/srv/sim", "/srv/sim"},
		} {
			ds, c := daemonSet(t, render(t, tc.sets...))
			e := env(c)
			if e["TESSERA_SIM_PROFILE"] != tc.profile || e["TESSERA_SIM_STATE_DIR"] != tc.dir {
				t.Errorf("%v: TESSERA_SIM_PROFILE=%q TESSERA_SIM_STATE_DIR=%q", tc.sets, e["TESSERA_SIM_PROFILE"], e["TESSERA_SIM_STATE_DIR"])
			}
			i := slices.IndexFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "sim-state" })
			j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "sim-state" })
			if i < 0 || j < 0 || ds.Spec.Template.Spec.Volumes[i].HostPath.Path != tc.at || c.VolumeMounts[j].MountPath != tc.at {
				t.Errorf("%v: sim state not mounted from and at %s", tc.sets, tc.at)
			}
		}
		if _, err := chart(t).Template(ns, "backend=cuda"); err == nil || !strings.Contains(err.Error(), "backend must be auto, nvml, amd or sim") {
			t.Errorf("backend=cuda: %v", err)
		}
	})
	t.Run("partitioning", func(t *testing.T) {
		for _, p := range []string{"static", "dynamic"} {
			_, c := daemonSet(t, render(t, "partitioning="+p))
			if got := env(c)["TESSERA_PARTITIONING"]; got != p {
				t.Errorf("partitioning=%s: TESSERA_PARTITIONING=%s", p, got)
			}
		}
		if _, err := chart(t).Template(ns, "partitioning=sometimes"); err == nil || !strings.Contains(err.Error(), "partitioning must be static or dynamic") {
			t.Errorf("partitioning=sometimes: %v", err)
		}
	})
	t.Run("dynamicProfiles", func(t *testing.T) {
		_, c := daemonSet(t, render(t, "dynamicProfiles={1g.10gb,3g.40gb}"))
		if got := env(c)["TESSERA_DYNAMIC_PROFILES"]; got != "1g.10gb,3g.40gb" {
			t.Errorf("TESSERA_DYNAMIC_PROFILES=%q", got)
		}
	})
	t.Run("dynamicWindow", func(t *testing.T) {
		if _, c := daemonSet(t, render(t)); env(c)["TESSERA_DYNAMIC_WINDOW"] != "2" {
			t.Errorf("default TESSERA_DYNAMIC_WINDOW=%q, want 2", env(c)["TESSERA_DYNAMIC_WINDOW"])
		}
		if _, c := daemonSet(t, render(t, "dynamicWindow=0")); env(c)["TESSERA_DYNAMIC_WINDOW"] != "0" {
			t.Errorf("dynamicWindow=0: TESSERA_DYNAMIC_WINDOW=%q", env(c)["TESSERA_DYNAMIC_WINDOW"])
		}
		for _, bad := range []string{"-1", "1.5", "two"} {
			if _, err := chart(t).Template(ns, "dynamicWindow="+bad); err == nil || !strings.Contains(err.Error(), "dynamicWindow must be a whole number") {
				t.Errorf("dynamicWindow=%s: %v", bad, err)
			}
		}
	})
	t.Run("sharing", func(t *testing.T) {
		for _, s := range []string{"none", "capacity"} {
			_, c := daemonSet(t, render(t, "sharing="+s))
			if got := env(c)["TESSERA_SHARING"]; got != s {
				t.Errorf("sharing=%s: TESSERA_SHARING=%s", s, got)
			}
		}
		if _, err := chart(t).Template(ns, "sharing=mps"); err == nil || !strings.Contains(err.Error(), "sharing must be none or capacity") {
			t.Errorf("sharing=mps: %v", err)
		}
		for _, l := range []string{"none", "process", "kernel"} {
			if _, c := daemonSet(t, render(t, "sharing=capacity", "minShareIsolation="+l)); env(c)["TESSERA_MIN_SHARE_ISOLATION"] != l {
				t.Errorf("minShareIsolation=%s: TESSERA_MIN_SHARE_ISOLATION=%s", l, env(c)["TESSERA_MIN_SHARE_ISOLATION"])
			}
		}
		if _, err := chart(t).Template(ns, "minShareIsolation=strong"); err == nil || !strings.Contains(err.Error(), "minShareIsolation must be none, process or kernel") {
			t.Errorf("minShareIsolation=strong: %v", err)
		}
		for _, l := range []string{"share", "whole"} {
			if _, c := daemonSet(t, render(t, "sharing=capacity", "legacyMPSShares="+l)); env(c)["TESSERA_LEGACY_MPS_SHARES"] != l {
				t.Errorf("legacyMPSShares=%s: TESSERA_LEGACY_MPS_SHARES=%s", l, env(c)["TESSERA_LEGACY_MPS_SHARES"])
			}
		}
		if _, err := chart(t).Template(ns, "legacyMPSShares=never"); err == nil || !strings.Contains(err.Error(), "legacyMPSShares must be share or whole") {
			t.Errorf("legacyMPSShares=never: %v", err)
		}
	})
	t.Run("surgeUpgrades", func(t *testing.T) {
		ds, c := daemonSet(t, render(t))
		if u := ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxUnavailable.String() != "1" || u.MaxSurge != nil {
			t.Errorf("default update strategy %+v, want maxUnavailable 1", ds.Spec.UpdateStrategy)
		}
		if _, ok := env(c)["TESSERA_POD_UID"]; ok {
			t.Error("TESSERA_POD_UID without surgeUpgrades: the agent would register in standby")
		}
		ds, c = daemonSet(t, render(t, "surgeUpgrades=true"))
		if u := ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxSurge == nil || u.MaxSurge.String() != "1" || u.MaxUnavailable.String() != "0" {
			t.Errorf("surgeUpgrades: update strategy %+v, want maxSurge 1, maxUnavailable 0", ds.Spec.UpdateStrategy)
		}
		if got := env(c)["TESSERA_POD_UID"]; got != "fieldRef:metadata.uid" {
			t.Errorf("surgeUpgrades: TESSERA_POD_UID=%q, want the pod's UID", got)
		}
		if len(c.Ports) != 1 {
			t.Errorf("surgeUpgrades on the pod network: ports %+v, want the metrics port", c.Ports)
		}
		// On the host network a declared port is a host port, which the
		// surge pod could not get beside the old one: none is declared.
		_, c = daemonSet(t, render(t, "surgeUpgrades=true", "hostNetwork=true"))
		if len(c.Ports) != 0 || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Port.IntValue() != 9478 {
			t.Errorf("surgeUpgrades on the host network: ports %+v, readiness %+v; want none declared and the probe on 9478", c.Ports, c.ReadinessProbe)
		}
	})
	t.Run("logging", func(t *testing.T) {
		_, c := daemonSet(t, render(t, "logging.format=json", "logging.verbosity=5"))
		if want := []string{"-v=5", "--logging-format=json"}; !reflect.DeepEqual(c.Args, want) {
			t.Errorf("args %q, want %q", c.Args, want)
		}
		if _, err := chart(t).Template(ns, "logging.format=xml"); err == nil || !strings.Contains(err.Error(), "logging.format must be text or json") {
			t.Errorf("logging.format=xml: %v", err)
		}
	})
	t.Run("metricsPort", func(t *testing.T) {
		objs := render(t, "metrics.port=9555")
		_, c := daemonSet(t, objs)
		if env(c)["TESSERA_METRICS_ADDRESS"] != ":9555" || c.Ports[0].ContainerPort != 9555 {
			t.Errorf("env %v ports %v", env(c), c.Ports)
		}
		if svc := one[corev1.Service](t, objs, "Service", "tessera-metrics"); svc.Spec.Ports[0].Port != 9555 {
			t.Errorf("service port %d", svc.Spec.Ports[0].Port)
		}
	})
	t.Run("metricsOff", func(t *testing.T) {
		objs := render(t, "metrics.enabled=false", "serviceMonitor.enabled=true")
		_, c := daemonSet(t, objs)
		if v, ok := env(c)["TESSERA_METRICS_ADDRESS"]; !ok || v != "" {
			t.Errorf("TESSERA_METRICS_ADDRESS=%q (set %v), want set and empty", v, ok)
		}
		if c.LivenessProbe != nil || c.ReadinessProbe != nil || len(c.Ports) != 0 {
			t.Error("probes or ports without metrics")
		}
		if n := len(helmchart.Find(objs, "Service", "tessera-metrics")) + len(helmchart.Find(objs, "ServiceMonitor", "")); n != 0 {
			t.Errorf("Service or ServiceMonitor without metrics: %v", kinds(objs))
		}
	})
	t.Run("probesOff", func(t *testing.T) {
		_, c := daemonSet(t, render(t, "probes.liveness.enabled=false", "probes.readiness.enabled=false"))
		if c.LivenessProbe != nil || c.ReadinessProbe != nil {
			t.Error("probes rendered")
		}
	})
	t.Run("hostNetwork", func(t *testing.T) {
		ds, _ := daemonSet(t, render(t, "hostNetwork=true"))
		if !ds.Spec.Template.Spec.HostNetwork || ds.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("hostNetwork %v dnsPolicy %s", ds.Spec.Template.Spec.HostNetwork, ds.Spec.Template.Spec.DNSPolicy)
		}
	})
	t.Run("kubeletDir", func(t *testing.T) {
		ds, c := daemonSet(t, render(t, "kubeletDir=/var/lib/k0s/kubelet/"))
		e := env(c)
		if e["TESSERA_PLUGIN_DATA_DIR"] != "/var/lib/k0s/kubelet/plugins/gpu.tessera.dev" || e["TESSERA_REGISTRAR_DIR"] != "/var/lib/k0s/kubelet/plugins_registry" {
			t.Errorf("env %v", e)
		}
		var paths []string
		for _, v := range ds.Spec.Template.Spec.Volumes {
			paths = append(paths, v.HostPath.Path)
		}
		if !slices.Contains(paths, "/var/lib/k0s/kubelet/plugins/gpu.tessera.dev") || !slices.Contains(paths, "/var/lib/k0s/kubelet/plugins_registry") ||
			!slices.Contains(paths, "/var/lib/k0s/kubelet/pod-resources") {
			t.Errorf("host paths %v", paths)
		}
		if e["TESSERA_POD_RESOURCES_SOCKET"] != "/var/lib/k0s/kubelet/pod-resources/kubelet.sock" {
			t.Errorf("pod resources socket %q", e["TESSERA_POD_RESOURCES_SOCKET"])
		}
	})
	t.Run("attribution", func(t *testing.T) {
		for _, set := range [][]string{{"attribution.poll=0"}, {"metrics.enabled=false"}} {
			ds, c := daemonSet(t, render(t, set...))
			e := env(c)
			if e["TESSERA_ATTRIBUTION_POLL"] != "0" || e["TESSERA_POD_RESOURCES_SOCKET"] != "" {
				t.Errorf("%v: env %v", set, e)
			}
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.Name == "pod-resources" {
					t.Errorf("%v: the kubelet's pod-resources directory is mounted with nothing to poll it", set)
				}
			}
		}
		_, c := daemonSet(t, render(t, "attribution.poll=2s"))
		if got := env(c)["TESSERA_ATTRIBUTION_POLL"]; got != "2s" {
			t.Errorf("attribution.poll=2s: TESSERA_ATTRIBUTION_POLL=%q", got)
		}
	})
	t.Run("telemetry", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want string
		}{
			{nil, "10s"},
			{[]string{"telemetry.poll=30s"}, "30s"},
			{[]string{"telemetry.poll=0"}, "0"},
			{[]string{"metrics.enabled=false"}, "0"},
		} {
			_, c := daemonSet(t, render(t, tc.set...))
			if got := env(c)["TESSERA_TELEMETRY_POLL"]; got != tc.want {
				t.Errorf("%v: TESSERA_TELEMETRY_POLL=%q, want %q", tc.set, got, tc.want)
			}
		}
	})
	t.Run("image", func(t *testing.T) {
		_, c := daemonSet(t, render(t, "image.repository=registry.example/tessera", "image.tag=dev", "image.pullPolicy=Always"))
		if c.Image != "registry.example/tessera:dev" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
		}
	})
	t.Run("agentFlags", func(t *testing.T) {
		_, c := daemonSet(t, render(t, "sysfsRoot=/host", "kubeAPI.qps=20", "kubeAPI.burst=40"))
		e := env(c)
		if e["TESSERA_SYSFS_ROOT"] != "/host" || e["TESSERA_KUBE_API_QPS"] != "20" || e["TESSERA_KUBE_API_BURST"] != "40" {
			t.Errorf("env %v", e)
		}
	})
	t.Run("cdi", func(t *testing.T) {
		_, c := daemonSet(t, render(t, "cdi.dir=/run/cdi", "cdi.vendorDirs={/etc/cdi,/run/cdi}"))
		e := env(c)
		if e["TESSERA_CDI_DIR"] != "/run/cdi" || e["TESSERA_VENDOR_CDI_DIRS"] != "/etc/cdi,/run/cdi" {
			t.Errorf("env %v", e)
		}
		n := 0
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/run/cdi" {
				n++
				if m.ReadOnly {
					t.Error("cdi.dir mounted read-only")
				}
			}
		}
		if n != 1 {
			t.Errorf("/run/cdi mounted %d times", n)
		}
	})
}

// TestValuesDocumented: every value in values.yaml has a comment there and a
// row in the chart README's table.
func TestValuesDocumented(t *testing.T) {
	dir := filepath.Join(repo, "deployments/helm/tessera")
	data, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := utilyaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			// A map with content is a group (documented key by key); an
			// empty map or a list is a value.
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !freeForm[key] {
				walk(key+".", sub)
				continue
			}
			keys = append(keys, key)
		}
	}
	walk("", values)
	sort.Strings(keys)
	for _, k := range keys {
		if !strings.Contains(string(readme), "| `"+k+"` |") {
			t.Errorf("value %s has no row in deployments/helm/tessera/README.md", k)
		}
	}
	// Each leaf key is preceded by a comment line in values.yaml (a key of
	// a free-form map is documented by the map's comment).
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		trim := strings.TrimSpace(l)
		if trim == "" || strings.HasPrefix(trim, "#") || strings.HasPrefix(trim, "-") || !strings.Contains(trim, ":") {
			continue
		}
		if strings.HasSuffix(trim, ":") { // a group
			continue
		}
		prev := strings.TrimSpace(lines[i-1])
		if !strings.HasPrefix(prev, "#") && !inFreeForm(lines, i) {
			t.Errorf("values.yaml:%d: %q has no comment", i+1, trim)
		}
	}
}

// freeForm: maps whose keys are the user's (documented as one value).
var freeForm = map[string]bool{"resources": true, "probes.liveness": true, "probes.readiness": true, "updateStrategy": true, "webhook.resources": true, "dashboard.labels": true}

// inFreeForm: line i is a setting inside a free-form block (a probe's
// settings, resources, updateStrategy), which the block's comment covers.
func inFreeForm(lines []string, i int) bool {
	indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
	for j := i - 1; j >= 0; j-- {
		l := lines[j]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if in := len(l) - len(strings.TrimLeft(l, " ")); in < indent {
			switch strings.TrimSuffix(strings.TrimSpace(l), ":") {
			case "liveness", "readiness", "requests", "limits", "updateStrategy", "rollingUpdate":
				return true
			}
			return false
		}
	}
	return false
}

// TestRBACTable: every rule of the rendered ClusterRole (API group,
// resource, resource name, verb) has a row in the chart README's RBAC
// table, with why, and every row is a rule: an operator reviewing what a
// stolen agent token can do reads the whole of it there.
func TestRBACTable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repo, "deployments/helm/tessera/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "### RBAC\n")
	if start < 0 {
		t.Fatal("the chart README has no RBAC section")
	}
	section = section[start+len("### RBAC\n"):]
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	code := regexp.MustCompile("`([^`]*)`")
	names := regexp.MustCompile(`\(name ` + "`([^`]*)`" + `\)`)
	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 4 || strings.HasPrefix(cells[0], "---") || cells[0] == "API group" {
			continue
		}
		if strings.TrimSpace(cells[3]) == "" {
			t.Errorf("RBAC row %q says no why", line)
		}
		group := strings.Trim(cells[0], "`\"")
		resource := code.FindStringSubmatch(cells[1])[1]
		name := ""
		if m := names.FindStringSubmatch(cells[1]); m != nil {
			name = m[1]
		}
		for _, v := range code.FindAllStringSubmatch(cells[2], -1) {
			documented[group+" "+resource+" "+name+" "+v[1]] = true
		}
	}
	// With the IMEX daemon pods, whose nodes list the table has.
	objs := render(t, "imex.channels=8", "imex.daemons=pod")
	cr := one[rbacv1.ClusterRole](t, objs, "ClusterRole", "tessera")
	// The Role of mps.daemons pod (the default) is in the table too.
	role := one[rbacv1.Role](t, objs, "Role", "tessera-mps-daemons")
	granted := map[string]bool{}
	for _, r := range append(slices.Clone(cr.Rules), role.Rules...) {
		rnames := r.ResourceNames
		if len(rnames) == 0 {
			rnames = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range rnames {
					for _, v := range r.Verbs {
						granted[g+" "+res+" "+n+" "+v] = true
					}
				}
			}
		}
	}
	for k := range granted {
		if !documented[k] {
			t.Errorf("the ClusterRole or Role grants %q, which the chart README's RBAC table does not list", k)
		}
	}
	for k := range documented {
		if !granted[k] {
			t.Errorf("the chart README's RBAC table lists %q, which neither the ClusterRole nor the Role grants", k)
		}
	}
	if len(granted) < 8 {
		t.Errorf("read %d grants from the ClusterRole; the walk is broken", len(granted))
	}
}
