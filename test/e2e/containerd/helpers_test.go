package containerd

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/pkg/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
)

func namespace(t *testing.T, suffix string) string {
	t.Helper()
	return e2eutil.Namespace(t, client, suffix)
}

func checkpointClaims(t *testing.T, node string) map[string]checkpoint.State {
	t.Helper()
	return e2eutil.CheckpointClaims(t, cluster, node)
}

func specExists(node, uid string) bool { return e2eutil.SpecExists(cluster, node, uid) }

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
