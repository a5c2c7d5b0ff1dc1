package containerd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/pkg/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// namespace creates a fresh namespace for one test and waits until pods can
// be admitted into it (its default service account exists); suffix tells
// a test's namespaces apart.
func namespace(t *testing.T, suffix string) string {
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
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// checkpointClaims reads the claims and their states in a node's
// checkpoint, with the agent's own reader.
func checkpointClaims(t *testing.T, node string) map[string]checkpoint.State {
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

// specExists reports whether a node has a CDI spec for a claim UID.
func specExists(node, uid string) bool {
	m, _ := filepath.Glob(filepath.Join(cluster.CDIDir(node), "*"+uid+"*"))
	return len(m) > 0
}

// killPid SIGKILLs pid and waits until it is gone.
func killPid(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	for range 200 {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("pid %d survived SIGKILL", pid)
}
