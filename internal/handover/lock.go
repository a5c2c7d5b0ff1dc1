package handover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// LockName is the lock's file in the plugin's data directory.
const LockName = "agent.lock"

// pollInterval is how often a waiting agent tries the lock again: the
// handover's delay after the holder exits is at most this.
const pollInterval = 50 * time.Millisecond

// Lock is the node's lock, held.
type Lock struct {
	f *os.File
}

// Acquire takes the lock at path (created if missing), waiting while
// another process holds it, until ctx ends. It logs once that it waits, and
// how long it waited when it got it.
func Acquire(ctx context.Context, path string) (*Lock, error) {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("node lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node lock %s: %w", path, err)
	}
	start, waited := time.Now(), false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("node lock %s: %w", path, err)
		}
		if !waited {
			logger.Info("Another agent serves this node; waiting for it to exit before taking over", "lock", path)
			waited = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("node lock %s: %w", path, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
	if waited {
		logger.Info("Took over the node from the agent before", "lock", path, "waited", time.Since(start).Round(time.Millisecond))
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up; nil-safe. Exiting releases it too.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
