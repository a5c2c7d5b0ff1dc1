package chart

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

// pinned is a metricsFrom peer pinned to the scraper's namespace.
const pinned = `networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring`

// TestMetricsAuth: by default the agent authenticates /metrics over HTTPS
// and the chart renders what a scraper needs: the reader ClusterRole
// (bound to the ServiceAccounts named), a ServiceMonitor that scrapes with
// a token and the right TLS settings; the probes stay plain HTTP.
func TestMetricsAuth(t *testing.T) {
	objs := render(t)
	_, c := daemonSet(t, objs)
	e := env(c)
	if e["TESSERA_METRICS_AUTH"] != "true" || e["TESSERA_METRICS_TLS_CERT_FILE"] != "" || e["TESSERA_METRICS_TLS_KEY_FILE"] != "" {
		t.Errorf("env %v: want authentication on with a generated certificate", e)
	}
	// Plain HTTP: the agent answers /healthz and /readyz over both, so an
	// upgrade's new pod is probed alike by an old agent and a new one.
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || (p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != corev1.URISchemeHTTP) {
			t.Errorf("%s probe %+v: want plain HTTP", name, p)
		}
	}
	reader := one[rbacv1.ClusterRole](t, objs, "ClusterRole", "tessera-metrics-reader")
	if want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}; !reflect.DeepEqual(reader.Rules, want) {
		t.Errorf("metrics reader rules %+v, want %+v", reader.Rules, want)
	}
	if n := len(helmchart.Find(objs, "ClusterRoleBinding", "tessera-metrics-reader")); n != 0 {
		t.Errorf("%d bindings of the metrics reader with no scraper named", n)
	}

	objs = render(t, "metrics.auth.scraperServiceAccounts[0].name=prometheus-k8s", "metrics.auth.scraperServiceAccounts[0].namespace=monitoring",
		"metrics.auth.scraperServiceAccounts[1].name=agent", "metrics.auth.scraperServiceAccounts[1].namespace=grafana")
	b := one[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "tessera-metrics-reader")
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}, {Kind: "ServiceAccount", Name: "agent", Namespace: "grafana"}}
	if b.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "tessera-metrics-reader"}) || !reflect.DeepEqual(b.Subjects, wantSubjects) {
		t.Errorf("binding %+v %+v", b.RoleRef, b.Subjects)
	}
}

// endpoint is the ServiceMonitor's one endpoint.
func endpoint(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	sm := helmchart.Find(objs, "ServiceMonitor", "tessera")
	if len(sm) != 1 {
		t.Fatalf("ServiceMonitor: %v", kinds(objs))
	}
	eps, _, _ := unstructured.NestedSlice(sm[0].Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("endpoints %v", eps)
	}
	return eps[0].(map[string]any)
}

// TestServiceMonitorAuth: how the ServiceMonitor scrapes for each way the
// agent serves: HTTPS with Prometheus's own token, verification skipped
// only for the agents' self-signed certificates.
func TestServiceMonitorAuth(t *testing.T) {
	const saToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	for _, tc := range []struct {
		name string
		sets []string
		want map[string]any // the endpoint's scheme, token and TLS fields
	}{
		{"self-signed", nil, map[string]any{
			"scheme": "https", "bearerTokenFile": saToken,
			"tlsConfig": map[string]any{"insecureSkipVerify": true},
		}},
		{"the operator's certificate", []string{"metrics.tls.existingSecret=agent-metrics-tls"}, map[string]any{
			"scheme": "https", "bearerTokenFile": saToken,
			"tlsConfig": map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "agent-metrics-tls", "key": "ca.crt"}}, "serverName": "tessera-metrics." + ns + ".svc"},
		}},
		{"its server name", []string{"metrics.tls.existingSecret=agent-metrics-tls", "metrics.tls.serverName=agents.example"}, map[string]any{
			"scheme": "https", "bearerTokenFile": saToken,
			"tlsConfig": map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "agent-metrics-tls", "key": "ca.crt"}}, "serverName": "agents.example"},
		}},
		{"a token Secret", []string{"serviceMonitor.bearerTokenSecret.name=prometheus-token", "serviceMonitor.bearerTokenSecret.key=token"}, map[string]any{
			"scheme":        "https",
			"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}},
			"tlsConfig":     map[string]any{"insecureSkipVerify": true},
		}},
		{"plain HTTP", []string{"metrics.auth.enabled=false", "attribution.poll=0"}, map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := endpoint(t, render(t, append([]string{"serviceMonitor.enabled=true"}, tc.sets...)...))
			got := map[string]any{}
			for _, k := range []string{"scheme", "bearerTokenFile", "authorization", "tlsConfig"} {
				if v, ok := ep[k]; ok {
					got[k] = v
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("endpoint %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestMetricsTLSSecret: the operator's certificate is mounted read-only,
// its key and certificate only, and named to the agent.
func TestMetricsTLSSecret(t *testing.T) {
	ds, c := daemonSet(t, render(t, "metrics.tls.existingSecret=agent-metrics-tls"))
	e := env(c)
	if e["TESSERA_METRICS_TLS_CERT_FILE"] != "/etc/tessera/metrics-tls/tls.crt" || e["TESSERA_METRICS_TLS_KEY_FILE"] != "/etc/tessera/metrics-tls/tls.key" {
		t.Errorf("env %v", e)
	}
	i := slices.IndexFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "metrics-tls" })
	j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "metrics-tls" })
	if i < 0 || j < 0 {
		t.Fatalf("metrics-tls volume %d, mount %d", i, j)
	}
	v, m := ds.Spec.Template.Spec.Volumes[i], c.VolumeMounts[j]
	if v.Secret == nil || v.Secret.SecretName != "agent-metrics-tls" || len(v.Secret.Items) != 2 || m.MountPath != "/etc/tessera/metrics-tls" || !m.ReadOnly {
		t.Errorf("volume %+v mount %+v", v, m)
	}
}

// TestMetricsAuthOptOut: metrics.auth.enabled=false serves plain HTTP
// without the reviews' rights or the reader role, and only where no
// tenant's names are on the port or the NetworkPolicy admits only peers of
// a namespace the tenants cannot put pods in; every other choice fails
// the render naming the values to change.
func TestMetricsAuthOptOut(t *testing.T) {
	const refused = "metrics.auth.enabled=false serves /metrics to anyone who reaches the port"
	for _, tc := range []struct {
		name    string
		sets    []string
		errHas  []string // empty: renders
		netpols int
	}{
		{"attribution on, no policy", nil, []string{refused, "attribution.poll=0", "networkPolicy.enabled=true", "networkPolicy.metricsFrom", "metrics.auth.enabled=true"}, 0},
		{"attribution off", []string{"attribution.poll=0"}, nil, 0},
		{"attribution off, as 0s", []string{"attribution.poll=0s"}, nil, 0},
		{"metrics off", []string{"metrics.enabled=false"}, nil, 0},
		{"the default peers: any namespace", []string{"networkPolicy.enabled=true"}, []string{refused}, 0},
		{"a peer pinned to the scraper's namespace", []string{"networkPolicy.enabled=true", pinned}, nil, 1},
		{"pinned, with a pod selector", []string{"networkPolicy.enabled=true", pinned, "networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prometheus"}, nil, 1},
		{"the release namespace's pods", []string{"networkPolicy.enabled=true", "json:networkPolicy.metricsFrom=[{\"podSelector\":{\"matchLabels\":{\"app\":\"prometheus\"}}}]"}, nil, 1},
		{"pinned but not rendered (hostNetwork)", []string{"networkPolicy.enabled=true", "hostNetwork=true", pinned}, []string{refused}, 0},
		{"pinned, beside an empty namespaceSelector", []string{"networkPolicy.enabled=true", "json:networkPolicy.metricsFrom=[{\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"monitoring\"}}},{\"namespaceSelector\":{}}]"}, []string{refused}, 0},
		{"an ipBlock", []string{"networkPolicy.enabled=true", "json:networkPolicy.metricsFrom=[{\"ipBlock\":{\"cidr\":\"10.0.0.0/8\"}}]"}, []string{refused}, 0},
		{"the operator's certificate", []string{"attribution.poll=0", "metrics.tls.existingSecret=agent-metrics-tls"}, []string{"metrics.tls.existingSecret", "plain HTTP"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := append([]string{"metrics.auth.enabled=false", "serviceMonitor.enabled=true"}, tc.sets...)
			objs, err := chart(t).Render(ns, sets...)
			if len(tc.errHas) > 0 {
				for _, want := range tc.errHas {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("%v: %v, want the render refused with %q", sets, err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %v", sets, err)
			}
			if n := len(helmchart.Find(objs, "NetworkPolicy", "")); n != tc.netpols {
				t.Errorf("%d NetworkPolicies, want %d", n, tc.netpols)
			}
			if n := len(helmchart.Find(objs, "ClusterRole", "tessera-metrics-reader")); n != 0 {
				t.Error("the metrics reader ClusterRole without authentication")
			}
			if slices.Contains(tc.sets, "metrics.enabled=false") {
				return
			}
			_, c := daemonSet(t, objs)
			if got := env(c)["TESSERA_METRICS_AUTH"]; got != "false" {
				t.Errorf("TESSERA_METRICS_AUTH=%q, want false", got)
			}
			if ep := endpoint(t, objs); ep["scheme"] != nil || ep["tlsConfig"] != nil || ep["bearerTokenFile"] != nil {
				t.Errorf("ServiceMonitor endpoint %v: want plain HTTP without a token", ep)
			}
		})
	}
}

// TestMetricsValuesRefused: values that name half of something fail the
// render saying which.
func TestMetricsValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		sets   []string
		errHas string
	}{
		{[]string{"metrics.auth.scraperServiceAccounts[0].name=prometheus-k8s"}, "metrics.auth.scraperServiceAccounts"},
		{[]string{"serviceMonitor.enabled=true", "serviceMonitor.bearerTokenSecret.name=prometheus-token"}, "serviceMonitor.bearerTokenSecret needs a name and a key"},
	} {
		if _, err := chart(t).Template(ns, tc.sets...); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%v: %v, want the render refused with %q", tc.sets, err, tc.errHas)
		}
	}
}

// TestMetricsValuesMissing: `helm upgrade --reuse-values` from a chart
// before metrics.auth renders with that chart's values, which lack the
// new ones: the render takes their defaults rather than failing.
func TestMetricsValuesMissing(t *testing.T) {
	objs := render(t, "metrics.auth=null", "metrics.tls=null", "serviceMonitor.bearerTokenSecret=null", "serviceMonitor.enabled=true")
	_, c := daemonSet(t, objs)
	if got := env(c)["TESSERA_METRICS_AUTH"]; got != "true" {
		t.Errorf("TESSERA_METRICS_AUTH=%q, want the default, true", got)
	}
	if ep := endpoint(t, objs); ep["scheme"] != "https" || ep["bearerTokenFile"] == nil {
		t.Errorf("ServiceMonitor endpoint %v, want the default: HTTPS with Prometheus's token", ep)
	}
	one[rbacv1.ClusterRole](t, objs, "ClusterRole", "tessera-metrics-reader")
}
