package memlimit

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// HookName is the hook binary's file name on a node.
const HookName = "tessera-cdi-hook"

// Install copies the running hook binary into dir on the host, atomically:
// a runtime that runs the hook while a new one is installed runs either
// whole. The chart's init container does this on every node.
func Install(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	dst := filepath.Join(dir, HookName)
	if err := fsutil.WriteFileAtomic(dst, b, 0o755); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	return dst, nil
}
