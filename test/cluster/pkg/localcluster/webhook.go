package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

const (
	// WebhookProc is the name of the tessera-webhook process in the state
	// and its log file.
	WebhookProc = "tessera-webhook"
	// ChartNamespace is the release namespace the chart is rendered for
	// (the one the e2e suite installs its objects into); the webhook
	// configuration's namespaceSelector leaves it out.
	ChartNamespace = "tessera-system"
	webhookPort    = "webhook"
)

// WebhookConfiguration is the chart's ValidatingWebhookConfiguration,
// rendered by helm for release namespace namespace, with only each
// webhook's clientConfig changed: to url, trusting caBundle. Its rules,
// failurePolicy, matchConditions and namespaceSelector are the chart's, so
// the local cluster tests what a user installs.
func WebhookConfiguration(ch *helmchart.Chart, namespace, url string, caBundle []byte) (*admissionv1.ValidatingWebhookConfiguration, error) {
	objs, err := ch.Render(namespace)
	if err != nil {
		return nil, fmt.Errorf("render the chart: %w", err)
	}
	found := helmchart.Find(objs, "ValidatingWebhookConfiguration", "")
	if len(found) != 1 {
		return nil, fmt.Errorf("the chart renders %d ValidatingWebhookConfigurations, want 1", len(found))
	}
	var cfg admissionv1.ValidatingWebhookConfiguration
	if err := helmchart.Convert(found[0], &cfg); err != nil {
		return nil, fmt.Errorf("the chart's ValidatingWebhookConfiguration: %w", err)
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig = admissionv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
	}
	return &cfg, nil
}

func (c *Config) chart() (*helmchart.Chart, error) {
	ch := &helmchart.Chart{Helm: c.bin("helm"), Dir: c.Chart}
	if _, err := os.Stat(ch.Helm); err != nil {
		return nil, fmt.Errorf("helm renders the webhook configuration: %w (make cluster-bins builds it)", err)
	}
	return ch, nil
}

// WebhookURL is the /validate URL of the running webhook ("" when none).
func WebhookURL(s *State) string {
	port, ok := s.Ports[webhookPort]
	if !ok {
		return ""
	}
	return "https://127.0.0.1:" + strconv.Itoa(port) + "/validate"
}

func (c *Config) webhookPortFile() string { return filepath.Join(c.Dir, "webhook.port") }

// StartWebhook starts tessera-webhook on 127.0.0.1 with a serving
// certificate of the cluster's CA, points the chart's webhook configuration
// at it and returns once the API server sends it reviews (a bad config is
// refused by it). Each start gets a new port, so the configuration is
// (re)applied every time. Tests restart it with StopWebhook and
// StartWebhook.
func (c *Config) StartWebhook(ctx context.Context, s *State) error {
	if err := c.startWebhookProcess(ctx, s); err != nil {
		return err
	}
	return c.registerWebhook(ctx, s)
}

// startWebhookProcess starts the process and records its port. It binds
// port 0 itself and reports the port in a file, so no other process can
// take the port between its choice and its use.
func (c *Config) startWebhookProcess(ctx context.Context, s *State) error {
	portFile := c.webhookPortFile()
	// A port file left by the previous run names a port nobody serves now.
	if err := os.Remove(portFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	p, err := c.start(s, WebhookProc, c.WebhookBin,
		"--tls-cert-file="+c.pkiPath("webhook.crt"),
		"--tls-private-key-file="+c.pkiPath("webhook.key"),
		"--bind-address=127.0.0.1:0",
		"--port-file="+portFile,
		"--v=4",
	)
	if err != nil {
		return err
	}
	proc := *p
	var port int
	if err := Poll(ctx, 30*time.Second, func() (bool, string, error) {
		if !alive(proc) {
			return false, "", fmt.Errorf("%s exited:\n%s", WebhookProc, tail(proc.Log, 20))
		}
		data, err := os.ReadFile(portFile)
		if err != nil {
			return false, err.Error(), nil
		}
		port, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil, fmt.Sprintf("port file %s: %q", portFile, data), nil
	}); err != nil {
		return fmt.Errorf("%s: %w", WebhookProc, err)
	}
	s.Ports[webhookPort] = port
	return c.saveState(s)
}

// registerWebhook creates or replaces the chart's configuration, pointed at
// the running webhook, and waits until it is in effect.
func (c *Config) registerWebhook(ctx context.Context, s *State) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	if err := c.applyWebhookConfiguration(ctx, client, WebhookURL(s)); err != nil {
		return fmt.Errorf("register %s: %w", WebhookProc, err)
	}
	return waitWebhook(ctx, client, c.procByName(s, WebhookProc))
}

// StopWebhook stops the webhook process (tests); the configuration stays,
// so the API server's calls fail and failurePolicy decides.
func (c *Config) StopWebhook(s *State) error {
	for i := len(s.Procs) - 1; i >= 0; i-- {
		if s.Procs[i].Name == WebhookProc {
			if err := stop(s.Procs[i], 10*time.Second); err != nil {
				return err
			}
			s.Procs = append(s.Procs[:i], s.Procs[i+1:]...)
			delete(s.Ports, webhookPort)
			return c.saveState(s)
		}
	}
	return fmt.Errorf("no %s process", WebhookProc)
}

// applyWebhookConfiguration creates or replaces the chart's configuration,
// pointed at url.
func (c *Config) applyWebhookConfiguration(ctx context.Context, client kubernetes.Interface, url string) error {
	ca, err := os.ReadFile(c.pkiPath("ca.crt"))
	if err != nil {
		return err
	}
	ch, err := c.chart()
	if err != nil {
		return err
	}
	want, err := WebhookConfiguration(ch, ChartNamespace, url, ca)
	if err != nil {
		return err
	}
	api := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		want.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, want, metav1.UpdateOptions{})
	}
	return err
}

// waitWebhook waits until the API server calls the webhook: a server-side
// dry run of a claim with a bad Tessera config is refused by it (before, the
// configuration is not loaded yet and the claim passes, or the API server
// still calls a previous port and fails).
func waitWebhook(ctx context.Context, client kubernetes.Interface, p Proc) error {
	probe := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "tessera-webhook-probe"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev"}}},
			Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver:     "gpu.tessera.dev",
				Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Spatial"}}`)},
			}}}},
		}},
	}
	return Poll(ctx, 60*time.Second, func() (bool, string, error) {
		if !alive(p) {
			return false, "", fmt.Errorf("%s exited:\n%s", WebhookProc, tail(p.Log, 20))
		}
		_, err := client.ResourceV1().ResourceClaims("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, "a claim with a bad config passed: the webhook configuration is not in effect yet", nil
		}
		ok := apierrors.IsInvalid(err) && strings.Contains(err.Error(), `admission webhook "resourceclaims.gpu.tessera.dev" denied the request`)
		return ok, err.Error(), nil
	})
}
