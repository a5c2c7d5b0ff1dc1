package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

// Opaque parameters of the webhook tests.
const (
	cfgTimeSlicingLong = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`
	cfgMPS             = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"4Gi"}}}`
	cfgThreads101      = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":101}}}`
	cfgPartitionShort  = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Short"}}}`
	otherDriver        = "other.example.com"
)

// opaque is a config entry of driver with params.
func opaque(driver, params string) resourceapi.DeviceConfiguration {
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)},
	}}
}

func claimSpec(configs ...resourceapi.DeviceConfiguration) resourceapi.ResourceClaimSpec {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev"},
	}}}}
	for _, c := range configs {
		spec.Devices.Config = append(spec.Devices.Config, resourceapi.DeviceClaimConfiguration{DeviceConfiguration: c})
	}
	return spec
}

func testClass(name string, configs ...resourceapi.DeviceConfiguration) *resourceapi.DeviceClass {
	dc := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.tessera.dev"`,
		}}}},
	}
	for _, c := range configs {
		dc.Spec.Config = append(dc.Spec.Config, resourceapi.DeviceClassConfiguration{DeviceConfiguration: c})
	}
	return dc
}

// writer creates one kind of object with the given configs in a namespace
// (ignored for DeviceClasses) and removes what it created when the test ends.
type writer struct {
	kind    string
	webhook string // the webhook registered for the kind
	create  func(t *testing.T, ns, name string, configs ...resourceapi.DeviceConfiguration) error
}

var writers = []writer{
	{"ResourceClaim", "resourceclaims.gpu.tessera.dev", func(t *testing.T, ns, name string, configs ...resourceapi.DeviceConfiguration) error {
		_, err := client.ResourceV1().ResourceClaims(ns).Create(context.Background(),
			&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: claimSpec(configs...)}, metav1.CreateOptions{})
		return err
	}},
	{"ResourceClaimTemplate", "resourceclaimtemplates.gpu.tessera.dev", func(t *testing.T, ns, name string, configs ...resourceapi.DeviceConfiguration) error {
		_, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(),
			&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claimSpec(configs...)}}, metav1.CreateOptions{})
		return err
	}},
	{"DeviceClass", "deviceclasses.gpu.tessera.dev", func(t *testing.T, _, name string, configs ...resourceapi.DeviceConfiguration) error {
		name = "webhook-e2e-" + name
		_, err := client.ResourceV1().DeviceClasses().Create(context.Background(), testClass(name, configs...), metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() {
				_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
		return err
	}},
}

// refusedByWebhook fails unless err is the webhook's denial of the object
// with every want (an error's full field path and message) in it.
func refusedByWebhook(t *testing.T, err error, webhook, object string, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s was admitted, want refused by webhook %s", object, webhook)
		return
	}
	prefix := `admission webhook "` + webhook + `" denied the request: ` + object + ": "
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), prefix) {
		t.Errorf("%s: %v\nwant an Invalid error starting %q", object, err, prefix)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v\nlacks %q", object, err, w)
		}
	}
}

// TestWebhook runs tessera-webhook behind the real API server with the
// chart's own webhook configuration (see localcluster.StartWebhook): bad
// Tessera configs are refused when written, with their field paths, good
// ones and other drivers' are admitted, and while the webhook is down only
// objects with a Tessera config are refused.
func TestWebhook(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })

	t.Run("BadClaimRefused", func(t *testing.T) {
		err := writers[0].create(t, ns, "bad", opaque("gpu.tessera.dev", cfgThreads101))
		refusedByWebhook(t, err, "resourceclaims.gpu.tessera.dev", "ResourceClaim "+ns+"/bad",
			"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100")
		if _, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused claim exists: %v", err)
		}
	})

	t.Run("EveryErrorReported", func(t *testing.T) {
		err := writers[0].create(t, ns, "bad-twice",
			opaque(otherDriver, `{"not":"ours"}`), opaque("gpu.tessera.dev", cfgThreads101), opaque("gpu.tessera.dev", cfgPartitionShort))
		refusedByWebhook(t, err, "resourceclaims.gpu.tessera.dev", "ResourceClaim "+ns+"/bad-twice",
			"spec.devices.config[1].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101",
			`spec.devices.config[2].opaque.parameters.sharing.timeSlicing.interval: Invalid value: "Short"`)
	})

	t.Run("GoodClaimsAdmitted", func(t *testing.T) {
		for name, params := range map[string]string{"time-slicing-long": cfgTimeSlicingLong, "mps-50-4gi": cfgMPS} {
			if err := writers[0].create(t, ns, name, opaque("gpu.tessera.dev", params)); err != nil {
				t.Errorf("claim %s: %v", name, err)
			}
		}
		// Another driver's config is that driver's business.
		if err := writers[0].create(t, ns, "other-driver", opaque(otherDriver, cfgThreads101)); err != nil {
			t.Errorf("claim with another driver's config: %v", err)
		}
	})

	t.Run("BadTemplateRefused", func(t *testing.T) {
		err := writers[1].create(t, ns, "bad-template", opaque("gpu.tessera.dev", cfgThreads101))
		refusedByWebhook(t, err, "resourceclaimtemplates.gpu.tessera.dev", "ResourceClaimTemplate "+ns+"/bad-template",
			"spec.spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100")
		if err := writers[1].create(t, ns, "good-template", opaque("gpu.tessera.dev", cfgMPS)); err != nil {
			t.Errorf("good template: %v", err)
		}
	})

	t.Run("BadDeviceClassRefused", func(t *testing.T) {
		err := writers[2].create(t, "", "bad", opaque("gpu.tessera.dev", cfgThreads101))
		refusedByWebhook(t, err, "deviceclasses.gpu.tessera.dev", "DeviceClass webhook-e2e-bad",
			"spec.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100")
	})

	t.Run("DeviceClassUpdateRefused", func(t *testing.T) {
		if err := writers[2].create(t, "", "shared", opaque("gpu.tessera.dev", cfgTimeSlicingLong)); err != nil {
			t.Fatalf("good class: %v", err)
		}
		classes := client.ResourceV1().DeviceClasses()
		dc, err := classes.Get(ctx, "webhook-e2e-shared", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dc.Spec.Config[0].Opaque.Parameters.Raw = []byte(cfgThreads101)
		_, err = classes.Update(ctx, dc, metav1.UpdateOptions{})
		refusedByWebhook(t, err, "deviceclasses.gpu.tessera.dev", "DeviceClass webhook-e2e-shared",
			"spec.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101")
	})

	t.Run("WebhookDown", func(t *testing.T) { webhookDown(t, ctx, ns) })
}

// webhookDown stops the webhook: failurePolicy Fail refuses every object
// with a Tessera config, and the matchConditions let every other through.
// The webhook is started again (and in effect) before it returns.
func webhookDown(t *testing.T, ctx context.Context, ns string) {
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.StopWebhook(s); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() error {
		if restarted {
			return nil
		}
		restarted = true
		s, err := cluster.LoadState()
		if err != nil {
			return err
		}
		return cluster.StartWebhook(ctx, s)
	}
	// Whatever fails below, the later tests get their webhook back.
	t.Cleanup(func() {
		if err := restart(); err != nil {
			t.Errorf("restart the webhook: %v", err)
		}
	})

	for _, w := range writers {
		if err := w.create(t, ns, "down-plain"); err != nil {
			t.Errorf("%s without config, webhook down: %v", w.kind, err)
		}
		if err := w.create(t, ns, "down-other", opaque(otherDriver, `{"any":"thing"}`)); err != nil {
			t.Errorf("%s with another driver's config, webhook down: %v", w.kind, err)
		}
		err := w.create(t, ns, "down-tessera", opaque("gpu.tessera.dev", cfgMPS))
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "`+w.webhook+`"`) {
			t.Errorf("%s with a Tessera config, webhook down: %v; want refused, failed calling webhook %s", w.kind, err, w.webhook)
		}
	}

	if err := restart(); err != nil {
		t.Fatalf("restart the webhook: %v", err)
	}
	if err := writers[0].create(t, ns, "after-restart", opaque("gpu.tessera.dev", cfgMPS)); err != nil {
		t.Errorf("good claim after the restart: %v", err)
	}
	err = writers[0].create(t, ns, "bad-after-restart", opaque("gpu.tessera.dev", cfgThreads101))
	refusedByWebhook(t, err, "resourceclaims.gpu.tessera.dev", "ResourceClaim "+ns+"/bad-after-restart",
		"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101")
}

// TestWebhookChartKeepsCertificate renders the chart as an upgrade does,
// against the API server: once the webhook's Secret exists, the chart
// renders that Secret's certificate and CA again (lookup) instead of new
// ones, so an upgrade changes neither the pods' certificate nor the
// configuration's caBundle, until the certificate expires within
// webhook.tls.renewBeforeDays (or its Secret does not say when): then the
// upgrade renews it and the configuration trusts both CAs, so the pods'
// old certificate verifies until they read the new one.
func TestWebhookChartKeepsCertificate(t *testing.T) {
	ctx := context.Background()
	ch, err := helmchart.ForRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	// A release of its own in a namespace of its own, without the objects
	// the local cluster already has (DeviceClasses), which helm would refuse
	// to take over.
	const release = "lookup"
	ns := namespace(t)
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	sets := []string{"deviceClasses.gpu=false", "deviceClasses.nvidia=false", "deviceClasses.amd=false", "deviceClasses.mig=false", "deviceClasses.xcp=false", "deviceClasses.imex=false", "deviceClasses.vfio=false"}
	// render returns the Secret and the PEM certificates of the caBundle
	// every webhook of the configuration has (they must agree).
	render := func() (*corev1.Secret, [][]byte) {
		t.Helper()
		data, err := ch.TemplateOnCluster(cluster.Kubeconfig(), release, ns, sets...)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := helmchart.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		var secret corev1.Secret
		var cfg admissionregv1.ValidatingWebhookConfiguration
		for kind, into := range map[string]any{"Secret": &secret, "ValidatingWebhookConfiguration": &cfg} {
			found := helmchart.Find(objs, kind, "")
			if len(found) != 1 {
				t.Fatalf("%d %s rendered, want 1", len(found), kind)
			}
			if err := helmchart.Convert(found[0], into); err != nil {
				t.Fatal(err)
			}
		}
		bundle := cfg.Webhooks[0].ClientConfig.CABundle
		for _, w := range cfg.Webhooks {
			if string(w.ClientConfig.CABundle) != string(bundle) {
				t.Errorf("%s: caBundle differs from %s's", w.Name, cfg.Webhooks[0].Name)
			}
		}
		return &secret, pemBlocks(t, bundle)
	}
	// install writes what `helm install` leaves: the Secret, owned by the
	// release, with its not-after annotation set to notAfter ("" drops it).
	install := func(s *corev1.Secret, notAfter string) {
		t.Helper()
		s = s.DeepCopy()
		s.Annotations["meta.helm.sh/release-name"] = release
		s.Annotations["meta.helm.sh/release-namespace"] = ns
		if notAfter == "" {
			delete(s.Annotations, "gpu.tessera.dev/not-after")
		} else {
			s.Annotations["gpu.tessera.dev/not-after"] = notAfter
		}
		_ = client.CoreV1().Secrets(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if _, err := client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	installed, bundle := render()
	if len(bundle) != 1 || string(bundle[0]) != string(installed.Data["ca.crt"]) {
		t.Fatalf("install: caBundle of %d certificates, want the Secret's ca.crt alone", len(bundle))
	}
	install(installed, installed.Annotations["gpu.tessera.dev/not-after"])
	upgraded, bundle := render()
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(installed.Data[k]) == 0 || string(upgraded.Data[k]) != string(installed.Data[k]) {
			t.Errorf("an upgrade renders a new %s (or none): the installed one must be kept", k)
		}
	}
	if len(bundle) != 1 || string(bundle[0]) != string(installed.Data["ca.crt"]) {
		t.Errorf("upgrade: caBundle of %d certificates, want the kept CA alone", len(bundle))
	}

	for _, tc := range []struct{ name, notAfter string }{
		{"expires within renewBeforeDays", time.Now().Add(10 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		{"no not-after annotation", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			install(installed, tc.notAfter)
			renewed, bundle := render()
			if string(renewed.Data["tls.crt"]) == string(installed.Data["tls.crt"]) || string(renewed.Data["ca.crt"]) == string(installed.Data["ca.crt"]) {
				t.Fatal("the upgrade kept the certificate")
			}
			if len(bundle) != 2 || string(bundle[0]) != string(renewed.Data["ca.crt"]) || string(bundle[1]) != string(installed.Data["ca.crt"]) {
				t.Fatalf("renewal: caBundle of %d certificates, want the new CA then the old", len(bundle))
			}
			// Both the pods' old certificate and the new one verify against
			// what the API server now trusts.
			all := []byte(string(bundle[0]) + string(bundle[1]))
			for name, s := range map[string]*corev1.Secret{"old": installed, "new": renewed} {
				if err := verifyAgainst(s.Data["tls.crt"], all, "lookup-tessera-webhook."+ns+".svc"); err != nil {
					t.Errorf("the %s serving certificate against the renewal's caBundle: %v", name, err)
				}
			}
			notAfter, err := time.Parse(time.RFC3339, renewed.Annotations["gpu.tessera.dev/not-after"])
			if err != nil || time.Until(notAfter) < 360*24*time.Hour {
				t.Errorf("renewed not-after %q (%v), want a year ahead", renewed.Annotations["gpu.tessera.dev/not-after"], err)
			}
		})
	}
}

// pemBlocks splits a PEM bundle into its certificates, each re-encoded.
func pemBlocks(t *testing.T, bundle []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		out = append(out, pem.EncodeToMemory(b))
	}
	return out
}

// verifyAgainst verifies a PEM serving certificate for dnsName against the
// PEM roots.
func verifyAgainst(certPEM, rootsPEM []byte, dnsName string) error {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return fmt.Errorf("no PEM certificate")
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootsPEM) {
		return fmt.Errorf("no roots in the bundle")
	}
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: roots})
	return err
}
