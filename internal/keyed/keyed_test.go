package keyed

import (
	"sync"
	"testing"
)

// One key is exclusive, distinct keys are not, and entries go with their
// last holder.
func TestMutex(t *testing.T) {
	var k Mutex
	var wg sync.WaitGroup
	counts := map[string]*int{"a": new(int), "b": new(int), "c": new(int)}
	for i := range 200 {
		key := []string{"a", "b", "c"}[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := k.Lock(key)
			defer unlock()
			*counts[key]++ // a data race (under -race) unless Lock excludes per key
		}()
	}
	wg.Wait()
	if got := *counts["a"] + *counts["b"] + *counts["c"]; got != 200 {
		t.Fatalf("%d increments, want 200", got)
	}
	if n := k.Len(); n != 0 {
		t.Errorf("%d entries left", n)
	}
	unlockA := k.Lock("a")
	done := make(chan struct{})
	go func() { k.Lock("b")(); close(done) }()
	<-done // b is not held up by a
	unlockA()
}
