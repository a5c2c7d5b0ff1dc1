package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Health: the simulator's GPUs are healthy unless faults are injected.
// Faults live in the state directory as an append-only log, health.jsonl,
// one JSON backend.HealthEvent a line, written by `tessera-sim inject` (or
// AppendFault): like the hardware's error counters they outlive an agent
// restart, and a running agent sees a new line within a poll. A reboot
// (another boot id) does not clear them; `tessera-sim inject --clear` does,
// as a GPU reset would.

// HealthFile is the fault log's name in the state directory.
const HealthFile = "health.jsonl"

// healthPoll is how often WatchHealth looks for new faults.
const healthPoll = 250 * time.Millisecond

// watcher is one WatchHealth call.
type watcher struct {
	ch   chan backend.HealthEvent
	done chan struct{}
}

// baseline is the time of the zero counters every watch starts from: before
// any fault, so a replayed log computes rates from its own times.
var baseline = time.Unix(0, 0).UTC()

// HealthSnapshot is what a new WatchHealth sends first: each GPU's counters
// at zero, then every recorded fault. The agent's --dry-run uses it to show
// the taints a running agent would publish.
func (b *Backend) HealthSnapshot() ([]backend.HealthEvent, error) {
	faults, _, err := readFaults(b.stateDir, 0)
	return append(b.baselines(), sinceRecovery(faults)...), err
}

// sinceRecovery keeps, per GPU, only the faults after its last recovery:
// what came before a reset is history the GPU no longer carries. Replaying
// it would publish taints long cleared, and a NoExecute one among them
// would evict pods for a moment on every agent start.
func sinceRecovery(faults []backend.HealthEvent) []backend.HealthEvent {
	last := map[string]int{}
	for i, f := range faults {
		if f.Kind == backend.HealthRecovered {
			last[f.UUID] = i
		}
	}
	var out []backend.HealthEvent
	for i, f := range faults {
		if j, ok := last[f.UUID]; !ok || i > j {
			out = append(out, f)
		}
	}
	return out
}

func (b *Backend) baselines() []backend.HealthEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []backend.HealthEvent
	for _, g := range b.node.GPUs {
		kinds := []backend.HealthKind{backend.HealthECCSingleBit, backend.HealthECCDoubleBit}
		if g.Vendor == inventory.VendorAMD {
			kinds = []backend.HealthKind{backend.HealthRASCorrectable, backend.HealthRASUncorrectable}
		}
		for _, k := range kinds {
			out = append(out, backend.HealthEvent{UUID: g.UUID, Kind: k, Time: baseline})
		}
	}
	return out
}

// WatchHealth implements backend.Backend: the snapshot (HealthSnapshot),
// then every fault appended to the log and every InjectHealth, until ctx
// ends.
func (b *Backend) WatchHealth(ctx context.Context, events chan<- backend.HealthEvent) error {
	w := &watcher{ch: make(chan backend.HealthEvent), done: make(chan struct{})}
	b.mu.Lock()
	b.watchers[w] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.watchers, w)
		b.mu.Unlock()
		close(w.done)
	}()
	send := func(ev backend.HealthEvent) bool {
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// Start from the state the log describes now, then follow it.
	faults, offset, err := readFaults(b.stateDir, 0)
	if err != nil {
		b.logger.Error(err, "Reading injected faults")
	}
	for _, ev := range append(b.baselines(), sinceRecovery(faults)...) {
		if !send(ev) {
			return nil
		}
	}
	tick := time.NewTicker(healthPoll)
	defer tick.Stop()
	for {
		faults, next, err := readFaults(b.stateDir, offset)
		if err != nil {
			b.logger.Error(err, "Reading injected faults")
		}
		offset = next
		for _, ev := range faults {
			if !send(ev) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case ev := <-w.ch:
			if !send(ev) {
				return nil
			}
		case <-tick.C:
		}
	}
}

// readFaults reads the complete lines of the fault log from offset and
// returns them with the offset after the last one. A torn last line (a
// writer mid-append) is left for the next read.
func readFaults(stateDir string, offset int64) ([]backend.HealthEvent, int64, error) {
	f, err := os.Open(filepath.Join(stateDir, HealthFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, offset, nil
	}
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, offset, err
	}
	var out []backend.HealthEvent
	var errs []error
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSpace(data[:i])
		data = data[i+1:]
		offset += int64(i + 1)
		if len(line) == 0 {
			continue
		}
		var ev backend.HealthEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			errs = append(errs, fmt.Errorf("%s: bad line %q: %w", HealthFile, line, err))
			continue
		}
		out = append(out, ev)
	}
	return out, offset, errors.Join(errs...)
}

// AppendFault records ev in the fault log of stateDir. Counting kinds take
// ev.Count as errors to add: the record carries the device's new total since
// its last recovery, as hardware counters do.
func AppendFault(stateDir string, ev backend.HealthEvent) (backend.HealthEvent, error) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	switch ev.Kind {
	case backend.HealthECCSingleBit, backend.HealthECCDoubleBit, backend.HealthRASCorrectable, backend.HealthRASUncorrectable:
		past, _, err := readFaults(stateDir, 0)
		if err != nil {
			return ev, err
		}
		var total int64
		for _, p := range past {
			switch {
			case p.UUID != ev.UUID:
			case p.Kind == backend.HealthRecovered:
				total = 0
			case p.Kind == ev.Kind:
				total = p.Count
			}
		}
		ev.Count += total
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return ev, err
	}
	f, err := os.OpenFile(filepath.Join(stateDir, HealthFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return ev, fmt.Errorf("open fault log: %w", err)
	}
	// One write of the whole line: a reader sees all of it or none.
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return ev, fmt.Errorf("append fault: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return ev, err
	}
	return ev, f.Close()
}

// InjectHealth delivers ev to every running WatchHealth (tests that drive
// a backend in-process) and returns once each has taken it or stopped. A
// zero ev.Time is set to now. It is not recorded in the fault log.
func (b *Backend) InjectHealth(ev backend.HealthEvent) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	b.mu.Lock()
	ws := make([]*watcher, 0, len(b.watchers))
	for w := range b.watchers {
		ws = append(ws, w)
	}
	b.mu.Unlock()
	for _, w := range ws {
		select {
		case w.ch <- ev:
		case <-w.done:
		}
	}
}

// watcherCount reports how many WatchHealth calls are running (tests wait
// on it before injecting).
func (b *Backend) watcherCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.watchers)
}

// HealthWatchers reports how many WatchHealth calls are running, so a test
// can wait for the agent's watch before injecting in-process.
func (b *Backend) HealthWatchers() int { return b.watcherCount() }
