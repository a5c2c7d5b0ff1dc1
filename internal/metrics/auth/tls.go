package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/webhook"
)

// SelfSignedValidity is how long a generated certificate is valid: it is
// made anew at each start, and an agent runs for months.
const SelfSignedValidity = 365 * 24 * time.Hour

// ServingTLS is the TLS configuration of the metrics port: the key pair in
// certFile and keyFile, read again when they change (a Secret's mount is
// updated in place), or with both empty a self-signed certificate for
// hosts (DNS names or IPs) generated now, as Kubernetes components do
// without --tls-cert-file. A self-signed certificate can be checked by no
// one: a scraper skips verification, which still keeps the token and the
// metrics from anyone who only listens on the network.
func ServingTLS(certFile, keyFile string, hosts []string, logger klog.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if certFile == "" && keyFile == "" {
		cert, err := SelfSigned(hosts, time.Now())
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil
	}
	// The webhook's reloader: the same Secret-mounted pair, rotated the
	// same way.
	r, err := webhook.NewCertReloader(logger, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("metrics TLS key pair: %w", err)
	}
	cfg.GetCertificate = r.GetCertificate
	return cfg, nil
}

// SelfSigned makes an ECDSA P-256 certificate for hosts, valid from now.
func SelfSigned(hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// The time in the name, as Kubernetes components' generated
		// certificates have: each start's certificate is told apart.
		Subject:               pkix.Name{CommonName: fmt.Sprintf("tessera-kubelet-plugin@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour), // clocks a little behind
		NotAfter:              now.Add(SelfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
