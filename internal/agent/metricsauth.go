package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/metrics/auth"
)

// validateMetricsAuth checks the metrics port's TLS flags: a certificate
// without its key (or the reverse) would only fail at the first scrape's
// handshake, and a certificate with --metrics-auth=false would be ignored.
func (c *Config) validateMetricsAuth() error {
	if (c.MetricsTLSCertFile == "") != (c.MetricsTLSKeyFile == "") {
		return errors.New("--metrics-tls-cert-file and --metrics-tls-key-file: give both or neither")
	}
	if !c.MetricsAuth && c.MetricsTLSCertFile != "" {
		return errors.New("--metrics-tls-cert-file: with --metrics-auth=false the port serves plain HTTP; drop the certificate or turn authentication on")
	}
	return nil
}

// metricsServing is how the metrics port serves: with --metrics-auth, the
// guard around /metrics (token and access reviews through client, the
// agent's own credentials) and the TLS configuration; without, neither.
func (c *Config) metricsServing(client kubernetes.Interface, logger klog.Logger) (func(http.Handler) http.Handler, *tls.Config, error) {
	if !c.MetricsAuth {
		if c.AttributionPoll != 0 {
			logger.Info("Serving /metrics WITHOUT authentication (--metrics-auth=false) and with pod attribution (--attribution-poll): anyone who reaches the port reads every tenant's pod, namespace, claim and container names; admit only the scraper's namespace to it (the chart's networkPolicy) or set --attribution-poll=0", "address", c.MetricsAddress)
		}
		return nil, nil, nil
	}
	tlsCfg, err := auth.ServingTLS(c.MetricsTLSCertFile, c.MetricsTLSKeyFile, c.metricsHosts(), logger)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-auth: serving certificate: %w", err)
	}
	g := &auth.Guard{
		Authn:  auth.NewTokenReviewer(client.AuthenticationV1().TokenReviews()),
		Authz:  auth.NewAccessReviewer(client.AuthorizationV1().SubjectAccessReviews()),
		Logger: logger.WithName("metrics-auth"),
	}
	if c.MetricsTLSCertFile == "" {
		logger.Info("Metrics served over HTTPS with a self-signed certificate generated at start; scrapers skip its verification (--metrics-tls-cert-file gives one they can verify)")
	}
	return g.Wrap, tlsCfg, nil
}

// metricsHosts are the names a generated certificate is for: no scraper
// can verify it, but its names say whose it is.
func (c *Config) metricsHosts() []string {
	hosts := []string{c.NodeName, "localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != c.NodeName {
		hosts = append(hosts, h)
	}
	if host, _, err := net.SplitHostPort(c.MetricsAddress); err == nil && net.ParseIP(host) != nil && !net.ParseIP(host).IsLoopback() && !net.ParseIP(host).IsUnspecified() {
		hosts = append(hosts, host)
	}
	return hosts
}
