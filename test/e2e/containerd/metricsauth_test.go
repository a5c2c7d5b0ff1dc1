package containerd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

// TestTopThroughPodProxy: kubectl tessera top reaches the chart's agent
// pods through the real API server's pod proxy, over HTTPS (the agents'
// self-signed certificates, which the proxy does not verify), and the
// token it forwards (X-Forwarded-Authorization: the proxy strips
// Authorization) is the one each agent reviews: the cluster's metrics
// reader's reads every node; a tenant ServiceAccount's gets the agents'
// 403; with none (the admin kubeconfig is a client certificate) the
// agents' 401 comes with the hint to give --metrics-token-file.
func TestTopThroughPodProxy(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "top-auth")
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenant, err := localcluster.ServiceAccountToken(ctx, client, ns, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	tenantFile := filepath.Join(t.TempDir(), "tenant.token")
	if err := os.WriteFile(tenantFile, []byte(tenant), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		extra  []string
		ok     bool
		outHas []string
	}{
		{"the metrics reader's token", []string{"--metrics-token-file", cluster.MetricsTokenFile()}, true, nodeNames()},
		{"a tenant's token", []string{"--metrics-token-file", tenantFile}, false, []string{"(https) via the API server", `cannot get path "/metrics"`}},
		{"no token", nil, false, []string{"(https) via the API server", "--metrics-token-file"}},
	} {
		args := append([]string{"top", "nodes", "--kubeconfig=" + cluster.Kubeconfig()}, tc.extra...)
		out, err := exec.Command(filepath.Join(repo, "bin/kubectl-tessera"), args...).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: exit 0 %v, want %v:\n%s", tc.name, err == nil, tc.ok, out)
		}
		for _, want := range tc.outHas {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, want, out)
			}
		}
	}
}

func nodeNames() []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}
