package localcluster

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// TestMetricsClient: the client trusts the agents' certificates the
// cluster's CA issued, for 127.0.0.1, and sends the token it is given.
func TestMetricsClient(t *testing.T) {
	c := &Config{Dir: t.TempDir(), Nodes: []Node{{Name: "n1", Profile: "l4-4"}}}
	p, err := c.makePKI()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(p.path(metricsCert("n1")+".crt"), p.path(metricsCert("n1")+".key"))
	if err != nil {
		t.Fatal(err)
	}
	var got string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("Authorization") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()

	if err := os.WriteFile(c.MetricsTokenFile(), []byte("reader-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token, err := c.MetricsToken()
	if err != nil || token != "reader-token" {
		t.Fatalf("MetricsToken: %q, %v", token, err)
	}
	for _, tc := range []struct{ token, want string }{{token, "Bearer reader-token"}, {"", ""}} {
		hc, err := c.MetricsClient(tc.token)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatalf("the agent's certificate is not trusted: %v", err)
		}
		resp.Body.Close()
		if got != tc.want {
			t.Errorf("token %q: Authorization %q, want %q", tc.token, got, tc.want)
		}
	}
	if flags := c.MetricsFlags(); len(flags) != 4 || flags[1] != c.MetricsCAFile() || flags[3] != c.MetricsTokenFile() {
		t.Errorf("MetricsFlags %v", flags)
	}
}
