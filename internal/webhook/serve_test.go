package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2/ktesting"
)

// TestServe starts the server as the local cluster does (port 0 and a port
// file), reviews over TLS, rotates the certificate and stops it.
func TestServe(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.pair(t, dir, 1, 1)
	portFile := filepath.Join(dir, "port")
	s, err := Start(ctx, &Config{CertFile: certFile, KeyFile: keyFile, BindAddress: "127.0.0.1:0", PortFile: portFile})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(portFile)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || port == 0 || port != s.Addr().(*net.TCPAddr).Port {
		t.Fatalf("port file %q, bound %s (%v)", data, s.Addr(), err)
	}
	base := "https://127.0.0.1:" + strconv.Itoa(port)

	// A client per call (no keep-alive), so each call is a new handshake,
	// and the certificate it saw.
	call := func(method, path string, body []byte) (int, string, int64) {
		t.Helper()
		c := &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: ca.pool},
			DisableKeepAlives: true,
		}}
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b), resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}

	if code, body, serial := call(http.MethodGet, "/readyz", nil); code != http.StatusOK || body != "ok\n" || serial != 1 {
		t.Errorf("readyz: %d %q, certificate %d", code, body, serial)
	}
	code, body, _ := call(http.MethodPost, "/validate", reviewJSON(claimInfo, "CREATE", "default", "bad", claimJSON("default", "bad", tessera(mpsThreads101)), ""))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal([]byte(body), &out); err != nil || code != http.StatusOK || out.Response == nil || out.Response.Allowed {
		t.Errorf("validate: %d %s (%v)", code, body, err)
	}

	ca.pair(t, dir, 2, 2)
	if _, _, serial := call(http.MethodGet, "/healthz", nil); serial != 2 {
		t.Errorf("after rotation the server presented certificate %d, want 2", serial)
	}

	cancel()
	if err := s.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
}

func TestStartFails(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.pair(t, dir, 1, 1)
	// Held open for the test: the address is in use.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no certificate", Config{CertFile: filepath.Join(dir, "none.crt"), KeyFile: keyFile, BindAddress: "127.0.0.1:0"}, "none.crt"},
		{"address in use", Config{CertFile: certFile, KeyFile: keyFile, BindAddress: busy.Addr().String()}, "--bind-address"},
		{"port file in a missing directory", Config{CertFile: certFile, KeyFile: keyFile, BindAddress: "127.0.0.1:0", PortFile: filepath.Join(dir, "no", "port")}, "--port-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(ctx, &tc.cfg)
			if err == nil {
				t.Fatalf("started on %s", s.Addr())
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigFlags(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key", "--port-file=/run/port"}); err != nil {
		t.Fatal(err)
	}
	want := Config{CertFile: "/tls/tls.crt", KeyFile: "/tls/tls.key", BindAddress: ":9443", PortFile: "/run/port"}
	if c != want {
		t.Errorf("flags %+v, want %+v", c, want)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg     Config
		wantErr []string
	}{
		{Config{CertFile: "c", KeyFile: "k", BindAddress: ":9443"}, nil},
		{Config{BindAddress: ":9443"}, []string{"--tls-cert-file is required", "--tls-private-key-file is required"}},
		{Config{CertFile: "c", KeyFile: "k"}, []string{"--bind-address is required"}},
	} {
		err := tc.cfg.Validate()
		if len(tc.wantErr) == 0 {
			if err != nil {
				t.Errorf("%+v: %v", tc.cfg, err)
			}
			continue
		}
		for _, w := range tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: err %v, want %q", tc.cfg, err, w)
			}
		}
	}
}
