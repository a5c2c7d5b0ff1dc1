package imexstandin

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/tessera-gpu/tessera/internal/imex"
)

// state is what the daemon's goroutines share: its links to the other
// peers and its fault.
type state struct {
	mu sync.Mutex
	// root is Run's context; epoch, a child of it, lives while no fault
	// is injected (nil while one is), and every link closes when it ends.
	root     context.Context
	epoch    context.Context
	endEpoch context.CancelFunc
	// resumed is closed when an injected fault clears.
	resumed chan struct{}
	fault   string
	links   map[string]*link
	order   []string
	// logged is the last refusal logged for each direction and peer
	// ("in 10.0.0.2"), so that a peer retrying does not fill the log with
	// the same line; peers outside the nodes list count too.
	logged map[string]string
}

// link is the daemon's side of one other peer.
type link struct {
	up bool
	// refused is the peer's last REFUSED answer, kept until it accepts us
	// or cannot be reached.
	refused string
	// kick wakes the dialer from its backoff.
	kick chan struct{}
}

func (s *state) init(root context.Context, others []string) {
	s.root = root
	s.epoch, s.endEpoch = context.WithCancel(root)
	s.links = map[string]*link{}
	s.logged = map[string]string{}
	s.order = others
	for _, p := range others {
		s.links[p] = &link{kick: make(chan struct{}, 1)}
	}
}

// current is the epoch links live in, nil while a fault is injected, and
// a channel closed once that fault clears.
func (s *state) current() (context.Context, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch, s.resumed
}

// setFault injects (on) or clears a fault and says whether that changed
// anything. Injecting ends the epoch, closing every link.
func (s *state) setFault(on bool, message string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	faulted := s.epoch == nil
	switch {
	case on && !faulted:
		s.endEpoch()
		s.epoch, s.resumed = nil, make(chan struct{})
	case !on && faulted:
		s.epoch, s.endEpoch = context.WithCancel(s.root)
		close(s.resumed)
	case on && message != s.fault:
		s.fault = message
		return true
	default:
		return false
	}
	s.fault = message
	return true
}

// set records the link to peer as up or down, and the peer's refusal
// ("" for none).
func (s *state) set(peer string, up bool, refused string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.links[peer]; l != nil {
		l.up, l.refused = up, refused
	}
}

// kick wakes peer's dialer, if it waits.
func (s *state) kick(peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.links[peer]; l != nil {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// kicks is the channel that wakes peer's dialer.
func (s *state) kicks(peer string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.links[peer].kick
}

// newRefusal records reason ("" once accepted) as the last refusal in
// direction dir ("in": of peer's hello, "out": of ours by peer) and says
// whether it differs from the one before: then it is worth a log line.
func (s *state) newRefusal(dir, peer, reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := dir + " " + peer
	if s.logged[key] == reason {
		return false
	}
	s.logged[key] = reason
	return reason != ""
}

// status is the line imex-ctl prints: READY, or NOT_READY and why. total
// counts the daemon itself.
func (s *state) status(quorum imex.Quorum, total int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch == nil {
		if s.fault != "" {
			return "NOT_READY: injected fault: " + s.fault
		}
		return "NOT_READY: injected fault"
	}
	if quorum == imex.QuorumNone {
		return imex.ReadyStatus
	}
	var missing, refusals []string
	for _, p := range s.order {
		l := s.links[p]
		if l.up {
			continue
		}
		missing = append(missing, p)
		if l.refused != "" {
			refusals = append(refusals, p+" refused: "+l.refused)
		}
	}
	if len(missing) == 0 {
		return imex.ReadyStatus
	}
	why := fmt.Sprintf("%d of %d peers connected", total-len(missing), total)
	if len(refusals) > 0 {
		why += "; " + strings.Join(refusals, "; ")
	}
	return fmt.Sprintf("NOT_READY: waiting for %s (%s)", strings.Join(missing, ", "), why)
}
