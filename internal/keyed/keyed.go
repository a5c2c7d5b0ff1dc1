// Package keyed serialises work per key (a claim UID, a daemon ID) without
// one lock for everything.
package keyed

import "sync"

// Mutex locks per key; an entry lives while someone holds or waits for
// it, so keys of long-gone claims do not accumulate. The zero value is
// ready to use.
type Mutex struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	sync.Mutex
	refs int
}

// Lock locks key and returns its unlock.
func (k *Mutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*entry{}
	}
	e := k.m[key]
	if e == nil {
		e = &entry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// Len is how many keys are held or waited for (tests).
func (k *Mutex) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
