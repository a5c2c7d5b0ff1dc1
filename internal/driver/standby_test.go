package driver

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestStandbyGate: a standby's calls wait for the takeover and then go to
// the Driver; one whose context ends first fails, saying why, and leaves
// the others waiting.
func TestStandbyGate(t *testing.T) {
	g := &standbyGate{ready: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.wait(ctx); err == nil || !strings.Contains(err.Error(), "standby") {
		t.Fatalf("wait before the takeover: %v, want a standby error", err)
	}
	got := make(chan *Driver)
	go func() {
		d, err := g.wait(t.Context())
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	d := &Driver{}
	g.set(d)
	select {
	case w := <-got:
		if w != d {
			t.Errorf("waiting call got driver %p, want %p", w, d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting call not released by the takeover")
	}
	if w, err := g.wait(t.Context()); err != nil || w != d {
		t.Errorf("call after the takeover: %p, %v", w, err)
	}
}

// TestSocketUID: the name of a pod's sockets is short, stable, and differs
// between two pods.
func TestSocketUID(t *testing.T) {
	a, b := socketUID("9a3f2a79-34db-4150-abb4-3e4b3bfd1010"), socketUID("790e35b3-510a-4065-b710-3dc850ad1860")
	if len(a) != 16 || a == b || a != socketUID("9a3f2a79-34db-4150-abb4-3e4b3bfd1010") {
		t.Errorf("socketUID: %q, %q", a, b)
	}
}
