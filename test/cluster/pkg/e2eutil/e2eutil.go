// Package e2eutil holds what the end-to-end suites (test/e2e on fake-runtime
// nodes, test/e2e/containerd on containerd nodes) share: bringing their
// cluster up around the tests, a namespace per test, and reading a node
// agent's checkpoint and CDI specs.
package e2eutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

// Run brings the cluster up, runs the tests, and brings it down; it
// returns the exit code. The logs stay when anything failed.
func Run(m *testing.M, cluster *localcluster.Config, client *kubernetes.Interface) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := cluster.Up(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cluster up:", err)
		return 1
	}
	fmt.Printf("e2e: cluster up in %s\n", time.Since(start).Round(100*time.Millisecond))
	code := 1
	defer func() {
		if err := cluster.Down(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cluster down:", err)
			code = 1
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "e2e: component logs kept in %s\n", cluster.LogDir())
		}
	}()
	var err error
	if *client, err = cluster.Client(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := FirstPod(ctx, cluster, *client); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Println("e2e: a pod created in the default namespace right after cluster up ran")
	code = m.Run()
	return code
}

// Namespace creates a fresh namespace for one test, named after it (and
// suffix, which tells a test's namespaces apart), and waits until pods can
// be admitted into it (localcluster.WaitPodsAdmitted).
func Namespace(t testing.TB, client kubernetes.Interface, suffix string) string {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	if suffix != "" {
		name += "-" + suffix
	}
	name = strings.Trim(name, "-")
	// A test run again in the same cluster (go test -count=N) gets a new
	// namespace: the first run's is left for its objects to be looked at.
	base := name
	for i := 2; ; i++ {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) || i > 99 {
			t.Fatal(err)
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	if err := localcluster.WaitPodsAdmitted(ctx, client, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// CheckpointClaims reads the claims and their states in a node's
// checkpoint, with the agent's own reader.
func CheckpointClaims(t *testing.T, cluster *localcluster.Config, node string) map[string]checkpoint.State {
	t.Helper()
	cp, err := checkpoint.Read(cluster.CheckpointPath(node))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]checkpoint.State{}
	for uid, c := range cp.Claims {
		out[uid] = c.State
	}
	return out
}

// SpecExists reports whether a node has a CDI spec for a claim UID.
func SpecExists(cluster *localcluster.Config, node, uid string) bool {
	m, _ := filepath.Glob(filepath.Join(cluster.CDIDir(node), "*"+uid+"*"))
	return len(m) > 0
}
