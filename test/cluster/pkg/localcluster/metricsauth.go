package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The agents serve /metrics as the chart's do by default (--metrics-auth):
// over HTTPS, to a bearer token the API server accepts of a user who may
// get /metrics. Their own calls (the token and access reviews) go out on
// the admin kubeconfig they run with, whose system:masters group may
// create both. What the cluster adds for the scrapers:
//
//   - each fake node's agent serves a certificate the cluster CA issued for
//     127.0.0.1 (--metrics-tls-cert-file), so a scraper verifies it against
//     MetricsCAFile instead of skipping verification;
//   - the ServiceAccount MetricsReaderNamespace/MetricsReaderName, bound to
//     a ClusterRole like the chart's <release>-metrics-reader, and a token
//     of it in MetricsTokenFile: what the tests and their Prometheus scrape
//     with. Its name is not the chart's: tests apply the chart's own
//     ClusterRole and delete it again, which must not take the cluster's
//     scrapers' right with it.
//
// A containerd node's agent is the chart's DaemonSet pod, with the chart's
// default: a self-signed certificate generated at its start.
const (
	MetricsReaderNamespace = "kube-system"
	MetricsReaderName      = "localcluster-metrics-reader"
)

// metricsTokenTTL outlives any cluster: the cluster's certificates are
// valid for a week too (pki.go).
const metricsTokenTTL = 7 * 24 * 3600

// MetricsTokenFile holds a token of the metrics reader, written by Up.
func (c *Config) MetricsTokenFile() string { return filepath.Join(c.Dir, "metrics-reader.token") }

// MetricsCAFile is the CA a fake node's agent's metrics certificate is
// verified against: the cluster's.
func (c *Config) MetricsCAFile() string { return c.pkiPath("ca.crt") }

// metricsCert is the pki name of a fake node's agent's serving certificate.
func metricsCert(node string) string { return "metrics-" + node }

// grantMetricsReader creates the metrics reader, its right to get /metrics
// and a token of it in MetricsTokenFile.
func (c *Config) grantMetricsReader(ctx context.Context, client kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderName},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("metrics reader ClusterRole: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: MetricsReaderNamespace, Name: MetricsReaderName}}
	if _, err := client.CoreV1().ServiceAccounts(MetricsReaderNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("metrics reader ServiceAccount: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReaderName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: MetricsReaderNamespace, Name: MetricsReaderName}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("metrics reader ClusterRoleBinding: %w", err)
	}
	token, err := ServiceAccountToken(ctx, client, MetricsReaderNamespace, MetricsReaderName)
	if err != nil {
		return err
	}
	return os.WriteFile(c.MetricsTokenFile(), []byte(token), 0o600)
}

// ServiceAccountToken is a token of namespace/name (a TokenRequest): what
// a pod of that account would present.
func ServiceAccountToken(ctx context.Context, client kubernetes.Interface, namespace, name string) (string, error) {
	ttl := int64(metricsTokenTTL)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// MetricsClient asks the fake nodes' agents' metrics ports as a scraper
// does: it verifies their certificates against MetricsCAFile and sends
// token (MetricsToken's, or another's) as the bearer; "" sends none.
func (c *Config) MetricsClient(token string) (*http.Client, error) {
	pem, err := os.ReadFile(c.MetricsCAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", c.MetricsCAFile())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	var rt http.RoundTripper = tr
	if token != "" {
		rt = bearer{token, tr}
	}
	return &http.Client{Transport: rt}, nil
}

// MetricsToken is the metrics reader's token that Up wrote.
func (c *Config) MetricsToken() (string, error) {
	data, err := os.ReadFile(c.MetricsTokenFile())
	if err != nil {
		return "", fmt.Errorf("metrics reader token (written by cluster-up): %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// MetricsFlags are kubectl tessera's flags for reading the fake nodes'
// agents at their --metrics-url: the CA of their certificates and the
// metrics reader's token (the admin kubeconfig holds a client
// certificate, no token to send).
func (c *Config) MetricsFlags() []string {
	return []string{"--metrics-ca-file", c.MetricsCAFile(), "--metrics-token-file", c.MetricsTokenFile()}
}

// bearer adds a bearer token to each request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
