package chart

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

const webhookName = "tessera-webhook"

// wantMatch: per resource, the matchCondition that sends the webhook only
// objects with a gpu.tessera.dev opaque config (whitespace aside).
var wantMatch = map[string]string{
	"resourceclaims": `has(object.spec.devices) && has(object.spec.devices.config) && ` +
		`object.spec.devices.config.exists(c, has(c.opaque) && c.opaque.driver == 'gpu.tessera.dev')`,
	"resourceclaimtemplates": `has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.config) && ` +
		`object.spec.spec.devices.config.exists(c, has(c.opaque) && c.opaque.driver == 'gpu.tessera.dev')`,
	"deviceclasses": `has(object.spec) && has(object.spec.config) && ` +
		`object.spec.config.exists(c, has(c.opaque) && c.opaque.driver == 'gpu.tessera.dev')`,
}

func webhookDeployment(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := one[appsv1.Deployment](t, objs, "Deployment", webhookName)
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers, want 1", n)
	}
	return d, &d.Spec.Template.Spec.Containers[0]
}

func vwc(t *testing.T, objs []*unstructured.Unstructured) *admissionv1.ValidatingWebhookConfiguration {
	t.Helper()
	return one[admissionv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", webhookName)
}

// webhookFlags: the webhook's flags, from internal/webhook/config.go.
var webhookFlags = flagsOf("internal/webhook/config.go")

func TestWebhookDefaults(t *testing.T) {
	objs := render(t)
	d, c := webhookDeployment(t, objs)
	pod := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	if c.Image != "ghcr.io/tessera-gpu/tessera-webhook:0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	}
	if want := []string{"-v=0", "--logging-format=text"}; !reflect.DeepEqual(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	wantEnv := map[string]string{
		"TESSERA_TLS_CERT_FILE":        "/etc/tessera-webhook/tls/tls.crt",
		"TESSERA_TLS_PRIVATE_KEY_FILE": "/etc/tessera-webhook/tls/tls.key",
		"TESSERA_BIND_ADDRESS":         ":9443",
	}
	if got := env(c); !reflect.DeepEqual(got, wantEnv) {
		t.Errorf("env\n%v\nwant\n%v", got, wantEnv)
	}
	for name := range wantEnv {
		if flag, ok := strings.CutPrefix(name, "TESSERA_"); !ok || !webhookFlags[strings.ToLower(strings.ReplaceAll(flag, "_", "-"))] {
			t.Errorf("%s sets no webhook flag (flags: %v)", name, webhookFlags)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "webhook" || c.Ports[0].ContainerPort != 9443 {
		t.Errorf("ports %+v", c.Ports)
	}
	for name, want := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}} {
		if p := want.p; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want.path || p.HTTPGet.Port.String() != "webhook" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("%s probe %+v: want GET https %s on port webhook", name, want.p, want.path)
		}
	}

	// Least privilege: no API token, not root, nothing writable, no
	// capabilities.
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("a service account token is mounted; the webhook calls no API")
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want non-root", pod.SecurityContext)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("securityContext %+v", sc)
	}

	// The certificate files are the Secret's, mounted read-only.
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "tessera-webhook-tls" {
		t.Fatalf("volumes %+v, want the Secret tessera-webhook-tls", pod.Volumes)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != pod.Volumes[0].Name || !c.VolumeMounts[0].ReadOnly ||
		c.VolumeMounts[0].MountPath != path.Dir(wantEnv["TESSERA_TLS_CERT_FILE"]) {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}

	// The Service reaches the webhook pods and only them; no agent
	// selector reaches them.
	svc := one[corev1.Service](t, objs, "Service", webhookName)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook" {
		t.Errorf("service ports %+v", svc.Spec.Ports)
	}
	ds, _ := daemonSet(t, objs)
	webhookPods, agentPods := labels.Set(d.Spec.Template.Labels), labels.Set(ds.Spec.Template.Labels)
	if sel := labels.SelectorFromSet(svc.Spec.Selector); !sel.Matches(webhookPods) || sel.Matches(agentPods) {
		t.Errorf("webhook Service selector %v", svc.Spec.Selector)
	}
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || !sel.Matches(webhookPods) || sel.Matches(agentPods) {
		t.Errorf("Deployment selector %v (%v)", d.Spec.Selector, err)
	}
	if sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); err != nil || sel.Matches(webhookPods) {
		t.Errorf("the DaemonSet's selector %v selects the webhook pods (%v)", ds.Spec.Selector, err)
	}
	if metricsSvc := one[corev1.Service](t, objs, "Service", "tessera-metrics"); labels.SelectorFromSet(metricsSvc.Spec.Selector).Matches(webhookPods) {
		t.Error("the metrics Service selects the webhook pods")
	}

	// The generated CA and serving certificate.
	secret := one[corev1.Secret](t, objs, "Secret", "tessera-webhook-tls")
	if secret.Type != corev1.SecretTypeTLS || secret.Namespace != ns {
		t.Errorf("secret type %s in %q", secret.Type, secret.Namespace)
	}
	ca := secret.Data["ca.crt"]
	leaf := verifyServing(t, secret.Data["tls.crt"], secret.Data["tls.key"], ca, webhookName+"."+ns+".svc")
	if days := leaf.NotAfter.Sub(leaf.NotBefore).Hours() / 24; days < 364 || days > 366 {
		t.Errorf("serving certificate valid %.1f days, want 365 (webhook.tls.validityDays)", days)
	}
	// The annotation an upgrade reads to decide on renewal is the
	// certificate's own expiry (Helm cannot parse a certificate).
	notAfter, err := time.Parse(time.RFC3339, secret.Annotations["gpu.tessera.dev/not-after"])
	if err != nil {
		t.Fatalf("not-after annotation: %v", err)
	}
	if d := notAfter.Sub(leaf.NotAfter); d < -time.Minute || d > time.Minute {
		t.Errorf("not-after annotation %s, certificate expires %s", notAfter, leaf.NotAfter)
	}

	// Availability: a PodDisruptionBudget over the webhook pods only, and
	// a spread over nodes.
	pdb := one[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", webhookName)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v minAvailable %v, want 1 and unset", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v (%v)", pdb.Spec.Selector, err)
	}
	if tsc := pod.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != "kubernetes.io/hostname" || tsc[0].MaxSkew != 1 ||
		tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway || !labels.SelectorFromSet(tsc[0].LabelSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("topologySpreadConstraints %+v, want one over kubernetes.io/hostname selecting the webhook pods", tsc)
	}

	cfg := vwc(t, objs)
	if len(cfg.Annotations) != 0 {
		t.Errorf("annotations %v without cert-manager", cfg.Annotations)
	}
	checkWebhooks(t, cfg, ns, 5)
	for _, w := range cfg.Webhooks {
		if string(w.ClientConfig.CABundle) != string(ca) {
			t.Errorf("%s: caBundle is not the Secret's ca.crt", w.Name)
		}
		want := &admissionv1.ServiceReference{Namespace: ns, Name: webhookName, Path: ptr("/validate"), Port: ptr[int32](443)}
		if w.ClientConfig.URL != nil || !reflect.DeepEqual(w.ClientConfig.Service, want) {
			t.Errorf("%s: clientConfig %+v, want the Service's /validate", w.Name, w.ClientConfig)
		}
	}
}

// checkWebhooks checks what every rendering shares: one webhook per
// resource, the rules, failurePolicy, matchConditions and namespaceSelector.
func checkWebhooks(t *testing.T, cfg *admissionv1.ValidatingWebhookConfiguration, namespace string, timeout int32) {
	t.Helper()
	scopes := map[string]admissionv1.ScopeType{"resourceclaims": admissionv1.NamespacedScope, "resourceclaimtemplates": admissionv1.NamespacedScope, "deviceclasses": admissionv1.ClusterScope}
	if len(cfg.Webhooks) != len(scopes) {
		t.Fatalf("%d webhooks, want %d", len(cfg.Webhooks), len(scopes))
	}
	excluded := []string{"kube-system", namespace}
	if namespace == "kube-system" {
		excluded = excluded[:1]
	}
	for _, w := range cfg.Webhooks {
		resource, ok := strings.CutSuffix(w.Name, ".gpu.tessera.dev")
		if !ok || scopes[resource] == "" {
			t.Errorf("webhook %q", w.Name)
			continue
		}
		scope := scopes[resource]
		wantRules := []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{resource}, Scope: &scope},
		}}
		if !reflect.DeepEqual(w.Rules, wantRules) {
			t.Errorf("%s: rules %+v", w.Name, w.Rules)
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail", w.Name, w.FailurePolicy)
		}
		if w.MatchPolicy == nil || *w.MatchPolicy != admissionv1.Equivalent {
			t.Errorf("%s: matchPolicy %v, want Equivalent", w.Name, w.MatchPolicy)
		}
		if w.SideEffects == nil || *w.SideEffects != admissionv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %v", w.Name, w.SideEffects)
		}
		if !reflect.DeepEqual(w.AdmissionReviewVersions, []string{"v1"}) {
			t.Errorf("%s: admissionReviewVersions %v", w.Name, w.AdmissionReviewVersions)
		}
		if w.TimeoutSeconds == nil || *w.TimeoutSeconds != timeout {
			t.Errorf("%s: timeoutSeconds %v, want %d", w.Name, w.TimeoutSeconds, timeout)
		}
		wantNS := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: excluded,
		}}}
		if !reflect.DeepEqual(w.NamespaceSelector, wantNS) {
			t.Errorf("%s: namespaceSelector %+v, want %+v", w.Name, w.NamespaceSelector, wantNS)
		}
		if w.ObjectSelector != nil && (len(w.ObjectSelector.MatchLabels) > 0 || len(w.ObjectSelector.MatchExpressions) > 0) {
			t.Errorf("%s: objectSelector %+v", w.Name, w.ObjectSelector)
		}
		if len(w.MatchConditions) != 1 || strings.Join(strings.Fields(w.MatchConditions[0].Expression), " ") != wantMatch[resource] {
			t.Errorf("%s: matchConditions %+v\nwant the one expression\n%s", w.Name, w.MatchConditions, wantMatch[resource])
		}
	}
}

// verifyServing checks that certPEM and keyPEM are a pair and that the
// certificate is valid for dnsName under caPEM; it returns the certificate.
func verifyServing(t *testing.T, certPEM, keyPEM, caPEM []byte, dnsName string) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("serving key pair: %v", err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("ca.crt is no PEM")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: roots}); err != nil {
		t.Errorf("serving certificate for %s: %v", dnsName, err)
	}
	return pair.Leaf
}

func TestWebhookOff(t *testing.T) {
	objs := render(t, "webhook.enabled=false")
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "webhook" {
			t.Errorf("webhook.enabled=false renders %s/%s", o.GetKind(), o.GetName())
		}
	}
	for _, kind := range []string{"Deployment", "Secret", "ValidatingWebhookConfiguration", "Issuer", "Certificate"} {
		if n := len(helmchart.Find(objs, kind, "")); n != 0 {
			t.Errorf("webhook.enabled=false: %d %s", n, kind)
		}
	}
	if len(helmchart.Find(objs, "DaemonSet", "")) != 1 || len(helmchart.Find(objs, "Service", "tessera-metrics")) != 1 {
		t.Errorf("webhook.enabled=false dropped the agent: %v", kinds(objs))
	}
	if n := len(helmchart.Find(render(t, "webhook.enabled=false", "webhook.certManager.enabled=true"), "Certificate", "")); n != 0 {
		t.Errorf("cert-manager objects without the webhook: %d", n)
	}
}

func TestWebhookCertManager(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sets       []string
		wantIssuer map[string]any
	}{
		{"self-signed issuer", nil, map[string]any{"kind": "Issuer", "name": "tessera-webhook-selfsigned"}},
		{"given issuer", []string{"webhook.certManager.issuerRef.kind=ClusterIssuer", "webhook.certManager.issuerRef.name=ca"}, map[string]any{"kind": "ClusterIssuer", "name": "ca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, append([]string{"webhook.certManager.enabled=true"}, tc.sets...)...)
			if n := len(helmchart.Find(objs, "Secret", "")); n != 0 {
				t.Errorf("%d Secrets; cert-manager writes it", n)
			}
			issuers := helmchart.Find(objs, "Issuer", "")
			if tc.sets == nil {
				if len(issuers) != 1 || issuers[0].GetName() != "tessera-webhook-selfsigned" || issuers[0].GetNamespace() != ns ||
					issuers[0].GetAPIVersion() != "cert-manager.io/v1" {
					t.Fatalf("issuers %v", kinds(issuers))
				}
				if ss, ok, _ := unstructured.NestedMap(issuers[0].Object, "spec", "selfSigned"); !ok || len(ss) != 0 {
					t.Errorf("issuer spec %v", issuers[0].Object["spec"])
				}
			} else if len(issuers) != 0 {
				t.Errorf("an Issuer next to issuerRef: %v", kinds(issuers))
			}
			certs := helmchart.Find(objs, "Certificate", webhookName)
			if len(certs) != 1 || certs[0].GetAPIVersion() != "cert-manager.io/v1" || certs[0].GetNamespace() != ns {
				t.Fatalf("certificates %v", kinds(objs))
			}
			spec, _, _ := unstructured.NestedMap(certs[0].Object, "spec")
			if spec["secretName"] != "tessera-webhook-tls" {
				t.Errorf("secretName %v", spec["secretName"])
			}
			if dns, _, _ := unstructured.NestedStringSlice(spec, "dnsNames"); !slices.Contains(dns, webhookName+"."+ns+".svc") {
				t.Errorf("dnsNames %v lack the name the API server calls", dns)
			}
			if ref, _, _ := unstructured.NestedMap(spec, "issuerRef"); !reflect.DeepEqual(ref, tc.wantIssuer) {
				t.Errorf("issuerRef %v, want %v", ref, tc.wantIssuer)
			}
			d, _ := webhookDeployment(t, objs)
			if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != "tessera-webhook-tls" {
				t.Errorf("volumes %+v: want cert-manager's Secret", v)
			}
			cfg := vwc(t, objs)
			if got := cfg.Annotations["cert-manager.io/inject-ca-from"]; got != ns+"/"+webhookName {
				t.Errorf("inject-ca-from %q, want %s/%s", got, ns, webhookName)
			}
			for _, w := range cfg.Webhooks {
				if len(w.ClientConfig.CABundle) != 0 {
					t.Errorf("%s: a caBundle next to cert-manager's injection", w.Name)
				}
			}
			checkWebhooks(t, cfg, ns, 5)
		})
	}
}

func TestWebhookOptions(t *testing.T) {
	t.Run("replicas, port, timeout", func(t *testing.T) {
		objs := render(t, "webhook.replicas=3", "webhook.port=8443", "webhook.timeoutSeconds=10")
		d, c := webhookDeployment(t, objs)
		if *d.Spec.Replicas != 3 || env(c)["TESSERA_BIND_ADDRESS"] != ":8443" || c.Ports[0].ContainerPort != 8443 {
			t.Errorf("replicas %d env %v ports %+v", *d.Spec.Replicas, env(c), c.Ports)
		}
		if svc := one[corev1.Service](t, objs, "Service", webhookName); svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook" {
			t.Errorf("service ports %+v", svc.Spec.Ports)
		}
		checkWebhooks(t, vwc(t, objs), ns, 10)
	})
	t.Run("image", func(t *testing.T) {
		_, c := webhookDeployment(t, render(t, "webhook.image.repository=registry.example/webhook", "webhook.image.tag=dev", "webhook.image.pullPolicy=Always"))
		if c.Image != "registry.example/webhook:dev" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
		}
	})
	t.Run("logging", func(t *testing.T) {
		_, c := webhookDeployment(t, render(t, "logging.format=json", "logging.verbosity=4"))
		if want := []string{"-v=4", "--logging-format=json"}; !reflect.DeepEqual(c.Args, want) {
			t.Errorf("args %q, want %q", c.Args, want)
		}
	})
	t.Run("scheduling", func(t *testing.T) {
		d, _ := webhookDeployment(t, render(t, "webhook.nodeSelector.role=infra", "webhook.tolerations[0].operator=Exists", "webhook.podAnnotations.a=b"))
		pod := d.Spec.Template
		if pod.Spec.NodeSelector["role"] != "infra" || len(pod.Spec.Tolerations) != 1 || pod.Annotations["a"] != "b" {
			t.Errorf("nodeSelector %v tolerations %v annotations %v", pod.Spec.NodeSelector, pod.Spec.Tolerations, pod.Annotations)
		}
	})
	t.Run("availability", func(t *testing.T) {
		// One replica: no budget (it would block every drain).
		for _, sets := range [][]string{{"webhook.replicas=1"}, {"webhook.podDisruptionBudget.enabled=false"}} {
			if n := len(helmchart.Find(render(t, sets...), "PodDisruptionBudget", "")); n != 0 {
				t.Errorf("%v: %d PodDisruptionBudgets", sets, n)
			}
		}
		objs := render(t, "webhook.replicas=3", "webhook.podDisruptionBudget.maxUnavailable=2", "webhook.topologySpreadConstraints=null")
		if pdb := one[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", webhookName); pdb.Spec.MaxUnavailable.IntValue() != 2 {
			t.Errorf("maxUnavailable %v", pdb.Spec.MaxUnavailable)
		}
		if d, _ := webhookDeployment(t, render(t, "json:webhook.topologySpreadConstraints=[]")); len(d.Spec.Template.Spec.TopologySpreadConstraints) != 0 {
			t.Errorf("topologySpreadConstraints=[]: %+v", d.Spec.Template.Spec.TopologySpreadConstraints)
		}
		d, _ := webhookDeployment(t, render(t, "webhook.topologySpreadConstraints[0].maxSkew=2", "webhook.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"webhook.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule"))
		if tsc := d.Spec.Template.Spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].MaxSkew != 2 {
			t.Errorf("an operator's constraints: %+v", tsc)
		}
	})
	t.Run("existingSecret", func(t *testing.T) {
		objs := render(t, "webhook.tls.existingSecret=site-tls", "webhook.tls.caBundle=Q0E=")
		if n := len(helmchart.Find(objs, "Secret", "")); n != 0 {
			t.Errorf("%d Secrets rendered with an existing one", n)
		}
		d, _ := webhookDeployment(t, objs)
		if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != "site-tls" {
			t.Errorf("volumes %+v, want Secret site-tls", v)
		}
		for _, w := range vwc(t, objs).Webhooks {
			if string(w.ClientConfig.CABundle) != "CA" {
				t.Errorf("%s: caBundle %q, want webhook.tls.caBundle", w.Name, w.ClientConfig.CABundle)
			}
		}
		// helm template cannot read the Secret: without the CA it refuses
		// rather than register a configuration the API server cannot trust.
		if _, err := chart(t).Template(ns, "webhook.tls.existingSecret=site-tls"); err == nil || !strings.Contains(err.Error(), "webhook.tls.existingSecret site-tls: set webhook.tls.caBundle") {
			t.Errorf("existingSecret without caBundle: %v", err)
		}
	})
	t.Run("validity", func(t *testing.T) {
		secret := one[corev1.Secret](t, render(t, "webhook.tls.validityDays=90", "webhook.tls.renewBeforeDays=10"), "Secret", "tessera-webhook-tls")
		leaf := verifyServing(t, secret.Data["tls.crt"], secret.Data["tls.key"], secret.Data["ca.crt"], webhookName+"."+ns+".svc")
		if days := leaf.NotAfter.Sub(leaf.NotBefore).Hours() / 24; days < 89 || days > 91 {
			t.Errorf("validityDays=90: certificate valid %.1f days", days)
		}
		if _, err := chart(t).Template(ns, "webhook.tls.renewBeforeDays=365"); err == nil || !strings.Contains(err.Error(), "must be less than webhook.tls.validityDays") {
			t.Errorf("renewBeforeDays=validityDays: %v", err)
		}
	})
	t.Run("installed in kube-system", func(t *testing.T) {
		objs, err := chart(t).Render("kube-system")
		if err != nil {
			t.Fatal(err)
		}
		checkWebhooks(t, vwc(t, objs), "kube-system", 5)
	})
}

func ptr[T any](v T) *T { return &v }

// TestLocalClusterWebhookConfiguration: the local cluster (and so the e2e
// suite) registers the chart's own configuration, with only clientConfig
// changed to its process's URL.
func TestLocalClusterWebhookConfiguration(t *testing.T) {
	if localcluster.ChartNamespace != ns {
		t.Errorf("the local cluster renders for namespace %s, these tests for %s", localcluster.ChartNamespace, ns)
	}
	fromChart := vwc(t, render(t))
	url := "https://127.0.0.1:4321/validate"
	local, err := localcluster.WebhookConfiguration(chart(t), ns, url, []byte("the cluster CA"))
	if err != nil {
		t.Fatal(err)
	}
	if len(local.Webhooks) != len(fromChart.Webhooks) {
		t.Fatalf("%d webhooks, the chart has %d", len(local.Webhooks), len(fromChart.Webhooks))
	}
	for i := range local.Webhooks {
		cc := local.Webhooks[i].ClientConfig
		if cc.URL == nil || *cc.URL != url || string(cc.CABundle) != "the cluster CA" || cc.Service != nil {
			t.Errorf("%s: clientConfig %+v", local.Webhooks[i].Name, cc)
		}
		local.Webhooks[i].ClientConfig = admissionv1.WebhookClientConfig{}
		fromChart.Webhooks[i].ClientConfig = admissionv1.WebhookClientConfig{}
	}
	if !reflect.DeepEqual(local, fromChart) {
		t.Errorf("the local cluster's configuration differs from the chart's beyond clientConfig:\n%+v\n%+v", local, fromChart)
	}
}
