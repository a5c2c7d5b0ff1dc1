package handover

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestLockOneHolder: while one holds the lock another waits (and gives up
// with its context); once the holder releases it (as its exit does), the
// waiter takes it.
func TestLockOneHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plugin", LockName)
	first, err := Acquire(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if l, err := Acquire(ctx, path); err == nil {
		l.Release()
		t.Fatal("a second agent took the lock while the first held it")
	}
	got := make(chan *Lock)
	go func() {
		l, err := Acquire(t.Context(), path)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case l := <-got:
		l.Release()
		t.Fatal("the waiter took the lock before the holder released it")
	case <-time.After(100 * time.Millisecond):
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not take the released lock")
	}
	var none *Lock
	if err := none.Release(); err != nil {
		t.Errorf("nil Release: %v", err)
	}
}
