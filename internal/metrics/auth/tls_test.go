package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// serve serves ok over TLS with cfg alone (httptest's StartTLS would add
// its own certificate) and returns its URL and the certificate a client is
// shown.
func serve(t *testing.T, cfg *tls.Config) (string, func() *x509.Certificate) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }),
		ErrorLog: log.New(io.Discard, "", 0), // the refused handshakes are the point
	}
	go srv.Serve(tls.NewListener(l, cfg))
	t.Cleanup(func() { srv.Close() })
	shown := func() *x509.Certificate {
		t.Helper()
		conn, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	return "https://" + l.Addr().String(), shown
}

// TestSelfSigned: without files the port serves a certificate made at
// start for the agent's names, which verifies only against itself.
func TestSelfSigned(t *testing.T) {
	cfg, err := ServingTLS("", "", []string{"gpu-node-1", "localhost", "127.0.0.1", "::1"}, ktesting.NewLogger(t, ktesting.DefaultConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x", cfg.MinVersion)
	}
	url, shown := serve(t, cfg)
	cert := shown()
	if !strings.HasPrefix(cert.Subject.CommonName, "tessera-kubelet-plugin@") || cert.Issuer.CommonName != cert.Subject.CommonName {
		t.Errorf("subject %q issuer %q: want a self-signed tessera-kubelet-plugin@<time>", cert.Subject.CommonName, cert.Issuer.CommonName)
	}
	if err := cert.VerifyHostname("gpu-node-1"); err != nil {
		t.Error(err)
	}
	if err := cert.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if d := cert.NotAfter.Sub(cert.NotBefore); d < SelfSignedValidity {
		t.Errorf("valid for %s", d)
	}
	// A client that verifies refuses it: it is signed by no one it trusts.
	if _, err := http.Get(url); err == nil || !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("verifying client: %v, want an unknown authority", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("client trusting the certificate itself: %v", err)
	}
	resp.Body.Close()
}

// writePair writes a fresh certificate and key for host into dir, stamped
// at mtime, and returns the certificate.
func writePair(t *testing.T, dir, host string, mtime time.Time) *x509.Certificate {
	t.Helper()
	c, err := SelfSigned([]string{host}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"tls.crt": {Type: "CERTIFICATE", Bytes: c.Certificate[0]},
		"tls.key": {Type: "PRIVATE KEY", Bytes: key},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return c.Leaf
}

// TestKeyPairFromFiles: a given pair is served, and replaced when its files
// change (a Secret rotated; internal/webhook's reloader tests the rest).
func TestKeyPairFromFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	logger := ktesting.NewLogger(t, ktesting.DefaultConfig)
	if _, err := ServingTLS(cert, key, nil, logger); err == nil || !strings.Contains(err.Error(), "metrics TLS key pair") {
		t.Errorf("missing files: %v", err)
	}
	base := time.Now().Add(-time.Hour)
	first := writePair(t, dir, "first", base)
	cfg, err := ServingTLS(cert, key, nil, logger)
	if err != nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("ServingTLS from files: %+v, %v", cfg, err)
	}
	_, shown := serve(t, cfg)
	if got := shown(); !got.Equal(first) {
		t.Fatalf("served %v, want the files' certificate", got.DNSNames)
	}
	second := writePair(t, dir, "second", base.Add(time.Minute))
	if got := shown(); !got.Equal(second) {
		t.Errorf("served %v after the files changed, want the second", got.DNSNames)
	}
}
