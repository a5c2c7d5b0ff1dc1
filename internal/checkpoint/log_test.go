package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// claimN is a prepared claim with one device, named by i.
func claimN(i int) *Claim {
	c := sample().Claims["uid-a"].Clone()
	c.UID = fmt.Sprintf("uid-%d", i)
	c.Name = fmt.Sprintf("claim-%d", i)
	return c
}

// model is what the saves describe, kept beside the store under test.
type model struct {
	t     *testing.T
	s     *Store
	state *Checkpoint
}

func newModel(t *testing.T, path string) *model {
	t.Helper()
	m := &model{t: t, s: NewStore(path), state: New()}
	m.state.BootID = "boot-0"
	if _, err := m.s.Load(); err != nil {
		t.Fatal(err)
	}
	if err := m.s.Save(m.state); err != nil { // the agent's start
		t.Fatal(err)
	}
	return m
}

// save saves the changes of claims (nil: deleted) and node fields, as the
// claim manager does: copies the store then owns.
func (m *model) save(claims map[string]*Claim) {
	m.t.Helper()
	ch := &Changes{Claims: map[string]*Claim{}, BootID: m.state.BootID, PartitionModeOn: slices.Clone(m.state.PartitionModeOn)}
	for uid, c := range claims {
		if c == nil {
			delete(m.state.Claims, uid)
			ch.Claims[uid] = nil
			continue
		}
		m.state.Claims[uid] = c
		ch.Claims[uid] = c.Clone()
	}
	if err := m.s.SaveChanges(ch); err != nil {
		m.t.Fatal(err)
	}
}

// want is the model's state, as a load returns it.
func (m *model) want() *Checkpoint {
	w := m.state.Clone()
	w.Version = CurrentVersion
	return w
}

// check loads the files with a fresh store (a restarted agent) and with
// Read (a tool), and compares both with the model.
func (m *model) check(what string) {
	m.t.Helper()
	got, err := NewStore(m.s.Path()).Load()
	if err != nil {
		m.t.Fatalf("%s: Load: %v", what, err)
	}
	if !reflect.DeepEqual(got, m.want()) {
		m.t.Fatalf("%s: Load:\n got %s\nwant %s", what, describe(got), describe(m.want()))
	}
	read, err := Read(m.s.Path())
	if err != nil || !reflect.DeepEqual(read, m.want()) {
		m.t.Fatalf("%s: Read = %s, %v", what, describe(read), err)
	}
}

func describe(cp *Checkpoint) string {
	if cp == nil {
		return "nil"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "boot %q modeOn %v claims:", cp.BootID, cp.PartitionModeOn)
	for _, uid := range slices.Sorted(func(yield func(string) bool) {
		for uid := range cp.Claims {
			if !yield(uid) {
				return
			}
		}
	}) {
		c := cp.Claims[uid]
		fmt.Fprintf(&b, " %s=%s/%s@%s", uid, c.State, c.Name, c.Updated.Format(time.RFC3339Nano))
	}
	return b.String()
}

// TestLogReplay: what a run of saves described is what a restart loads,
// from the snapshot and the log's records after it.
func TestLogReplay(t *testing.T) {
	tests := []struct {
		name  string
		saves func(m *model)
	}{
		{name: "prepares", saves: func(m *model) {
			for i := range 5 {
				m.save(map[string]*Claim{fmt.Sprint("uid-", i): claimN(i)})
			}
		}},
		{name: "prepare, complete, unprepare", saves: func(m *model) {
			c := claimN(1)
			c.State = PrepareStarted
			m.save(map[string]*Claim{c.UID: c})
			c = c.Clone()
			c.State = PrepareCompleted
			c.Devices[0].CDIDeviceIDs = []string{"k8s.gpu.tessera.dev/claim=uid-1-gpu-0"}
			m.save(map[string]*Claim{c.UID: c})
			m.save(map[string]*Claim{c.UID: nil})
		}},
		{name: "several claims in one save (group commit)", saves: func(m *model) {
			m.save(map[string]*Claim{"uid-1": claimN(1), "uid-2": claimN(2), "uid-3": claimN(3)})
			m.save(map[string]*Claim{"uid-1": nil, "uid-3": nil, "uid-4": claimN(4)})
		}},
		{name: "delete of a claim never saved", saves: func(m *model) {
			m.save(map[string]*Claim{"uid-1": claimN(1)})
			m.save(map[string]*Claim{"uid-ghost": nil})
		}},
		{name: "node-wide fields", saves: func(m *model) {
			m.state.PartitionModeOn = []string{"GPU-2"}
			m.save(nil)
			m.state.BootID = "boot-1"
			m.save(map[string]*Claim{"uid-1": claimN(1)})
			m.state.PartitionModeOn = nil
			m.save(nil)
		}},
		{name: "every kind of entry", saves: func(m *model) {
			for uid, c := range goldenState().Claims {
				m.save(map[string]*Claim{uid: c})
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			m := newModel(t, path)
			tt.saves(m)
			m.check("after the saves")
			if _, err := os.Stat(logPath(path)); err != nil {
				t.Errorf("no log: %v", err)
			}
			// A restarted agent's saves go on from what it loaded.
			m.s = NewStore(path)
			if _, err := m.s.Load(); err != nil {
				t.Fatal(err)
			}
			m.save(map[string]*Claim{"uid-99": claimN(99)})
			m.check("after a restart and a save")
		})
	}
}

// TestLogCutShort: a save cut short at any byte of what it writes loads as
// the state before it or, once all of it is written, after it; never an
// error, and the next save writes over what it left.
func TestLogCutShort(t *testing.T) {
	tests := []struct {
		name string
		// prepare saves what comes before the save that is cut short.
		prepare func(m *model)
	}{
		// The save appends its record to the log.
		{name: "append", prepare: func(m *model) {
			m.save(map[string]*Claim{"uid-1": claimN(1)})
			m.save(map[string]*Claim{"uid-2": claimN(2)})
		}},
		// The first save after a snapshot writes the log anew: its header
		// and the record.
		{name: "the log started again", prepare: func(m *model) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			m := newModel(t, path)
			tt.prepare(m)
			before := m.want()
			logBefore, _ := os.ReadFile(logPath(path)) // none after a snapshot
			if len(logBefore) == 0 && tt.name == "append" {
				t.Fatal("no log before the save")
			}
			c := claimN(3)
			c.State = PrepareStarted
			m.save(map[string]*Claim{c.UID: c, "uid-1": nil})
			after := m.want()
			full := mustRead(t, logPath(path))
			start := 0
			if bytes.HasPrefix(full, logBefore) && len(logBefore) > 0 {
				start = len(logBefore) // an append: the earlier lines stay
			}
			for cut := start; cut <= len(full); cut++ {
				if err := os.WriteFile(logPath(path), full[:cut], 0o600); err != nil {
					t.Fatal(err)
				}
				want := before
				if cut == len(full) {
					want = after
				}
				s := NewStore(path)
				got, err := s.Load()
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("log cut at byte %d of %d: Load = %s, %v\nwant %s", cut, len(full), describe(got), err, describe(want))
				}
				if aside, _ := filepath.Glob(path + "*.corrupt-*"); len(aside) != 0 {
					t.Fatalf("cut at byte %d: a cut-short save was moved aside as corrupt: %v", cut, aside)
				}
				// The next save goes on from what loaded.
				next := claimN(4)
				ch := &Changes{Claims: map[string]*Claim{next.UID: next.Clone()}, BootID: want.BootID, PartitionModeOn: want.PartitionModeOn}
				if err := s.SaveChanges(ch); err != nil {
					t.Fatal(err)
				}
				want = want.Clone()
				want.Claims[next.UID] = next
				if got, err := NewStore(path).Load(); err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("cut at byte %d, then a save: Load = %s, %v\nwant %s", cut, describe(got), err, describe(want))
				}
				// Back to the files as the cut left them, for the next cut.
				if err := os.WriteFile(logPath(path), full[:cut], 0o600); err != nil {
					t.Fatal(err)
				}
				restoreSnapshots(t, path, m.s)
			}
		})
	}
}

// restoreSnapshots writes back the snapshot files s last wrote, where a
// save after a cut may have written a new one.
func restoreSnapshots(t *testing.T, path string, s *Store) {
	t.Helper()
	for i, p := range slotPaths(path) {
		if i == 1-s.next {
			if err := os.WriteFile(p, s.last, 0o600); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// TestCompactionCutShort: a compaction writes a snapshot into the file
// that does not hold the newest one, and leaves the log, which follows the
// older snapshot, as it is. Cut short at any byte, the files load as
// before it (the older snapshot and the log); written whole, as after it
// (the log, stale now, ignored).
func TestCompactionCutShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	m := newModel(t, path)
	for i := range 4 {
		m.save(map[string]*Claim{fmt.Sprint("uid-", i): claimN(i)})
	}
	before := m.want()
	target := slotPaths(path)[m.s.next]
	// The compaction of a save that deletes one claim and puts another.
	c := claimN(7)
	m.state.Claims[c.UID] = c
	delete(m.state.Claims, "uid-0")
	m.s.mu.Lock()
	err := m.s.snapshot(&Changes{Claims: map[string]*Claim{c.UID: c.Clone(), "uid-0": nil}, BootID: m.state.BootID})
	m.s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	after := m.want()
	data := mustRead(t, target)
	if _, err := os.Stat(logPath(path)); err != nil {
		t.Fatalf("the compaction removed the log: %v", err)
	}
	for cut := 0; cut <= len(data); cut++ {
		if err := os.WriteFile(target, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		want := before
		if cut >= len(data)-1 { // all but the newline is the whole snapshot
			want = after
		}
		got, err := NewStore(path).Load()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("snapshot cut at byte %d of %d: Load = %s, %v\nwant %s", cut, len(data), describe(got), err, describe(want))
		}
	}
	// The next save starts the log again after the new snapshot.
	m.save(map[string]*Claim{"uid-8": claimN(8)})
	m.check("a save after the compaction")
}

func TestLogCorruptRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	m := newModel(t, path)
	for i := range 3 {
		m.save(map[string]*Claim{fmt.Sprint("uid-", i): claimN(i)})
	}
	before := m.want() // the state before the record corrupted
	m.save(map[string]*Claim{"uid-3": claimN(3)})
	m.save(map[string]*Claim{"uid-4": claimN(4)})
	data := mustRead(t, logPath(path))
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Line 0 is the header; 1-3 the first three saves; 4 the fourth.
	bad := bytes.Replace(slices.Clone(lines[4]), []byte("claim-3"), []byte("claim-X"), 1)
	corrupt := slices.Concat(slices.Concat(lines[:4]...), bad, slices.Concat(lines[5:]...))
	if err := os.WriteFile(logPath(path), corrupt, 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := Read(path); !errors.Is(err, ErrLogCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Read = %v, want ErrLogCorrupt with a checksum mismatch", err)
	}
	s := NewStore(path)
	got, err := s.Load()
	if !errors.Is(err, ErrLogCorrupt) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Load error = %v, want ErrLogCorrupt (not ErrCorrupt) naming the mismatch", err)
	}
	if !reflect.DeepEqual(got, before) {
		t.Fatalf("Load = %s, want the state before the corrupt record %s", describe(got), describe(before))
	}
	aside, _ := filepath.Glob(logPath(path) + ".corrupt-*")
	if len(aside) != 1 || !strings.Contains(err.Error(), aside[0]) {
		t.Fatalf("moved aside: %v; error %v", aside, err)
	}
	if kept := mustRead(t, aside[0]); !bytes.Equal(kept, corrupt) {
		t.Error("the moved-aside log differs from the corrupt one")
	}
	// The next save keeps what loaded (a snapshot: the records replayed
	// went with the log), and the next start loads it without an error.
	next := claimN(5)
	if err := s.SaveChanges(&Changes{Claims: map[string]*Claim{next.UID: next.Clone()}, BootID: got.BootID}); err != nil {
		t.Fatal(err)
	}
	want := before.Clone()
	want.Claims[next.UID] = next
	if got, err := NewStore(path).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a save: Load = %s, %v\nwant %s", describe(got), err, describe(want))
	}
}

// TestLogCorruptHeader: a header that does not parse is corruption too;
// the snapshot loads.
func TestLogCorruptHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	m := newModel(t, path)
	m.save(map[string]*Claim{"uid-1": claimN(1)})
	data := mustRead(t, logPath(path))
	if err := os.WriteFile(logPath(path), append([]byte("{torn\n"), data[bytes.IndexByte(data, '\n')+1:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := NewStore(path).Load()
	if !errors.Is(err, ErrLogCorrupt) || len(got.Claims) != 0 || got.BootID != "boot-0" {
		t.Fatalf("Load = %s, %v; want the snapshot and ErrLogCorrupt", describe(got), err)
	}
}

// TestCompaction: once the log outgrows the snapshot (and minLogBytes),
// the next save writes a snapshot instead and the log starts again after
// it; the log stays below its bound, and every state loads.
func TestCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	m := newModel(t, path)
	for i := range 200 { // a snapshot above minLogBytes
		m.state.Claims[fmt.Sprint("uid-", i)] = claimN(i)
	}
	if err := m.s.Save(m.state); err != nil {
		t.Fatal(err)
	}
	bound := int64(max(m.s.baseBytes, minLogBytes))
	if m.s.baseBytes <= minLogBytes {
		t.Fatalf("snapshot of %d bytes, want more than %d", m.s.baseBytes, minLogBytes)
	}
	snapshots, baseSeq := 0, m.s.baseSeq
	for i := range 600 {
		c := claimN(i % 200)
		c.Updated = t0.Add(time.Duration(i) * time.Second)
		m.save(map[string]*Claim{c.UID: c})
		if m.s.baseSeq != baseSeq {
			snapshots++
			baseSeq = m.s.baseSeq
			if m.s.logOK || m.s.seq != m.s.baseSeq {
				t.Fatalf("save %d: a compaction left the log in use", i)
			}
			m.check(fmt.Sprint("after the compaction at save ", i))
		}
		if st, err := os.Stat(logPath(path)); err == nil && st.Size() > bound {
			t.Fatalf("save %d: log of %d bytes, past its bound %d", i, st.Size(), bound)
		}
	}
	// ~900 bytes a record, ~190 KB a snapshot: a compaction every ~200 saves.
	if snapshots < 2 || snapshots > 4 {
		t.Errorf("%d compactions in 600 saves, want 2 to 4", snapshots)
	}
	m.check("after the saves")
}

// TestMirrorWritesFullSnapshot: at a graceful stop the state in the log is
// written whole into both snapshot files, in the format agents before the
// log read (decode, and Read of the first file alone), and the log goes.
func TestMirrorWritesFullSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	m := newModel(t, path)
	for i := range 5 {
		m.save(map[string]*Claim{fmt.Sprint("uid-", i): claimN(i)})
	}
	m.state.PartitionModeOn = []string{"GPU-7"}
	m.save(map[string]*Claim{"uid-2": nil})
	if err := m.s.Mirror(); err != nil {
		t.Fatal(err)
	}
	for _, p := range slotPaths(path) {
		cp, _, err := decode(mustRead(t, p))
		if err != nil || !reflect.DeepEqual(cp, m.want()) {
			t.Fatalf("%s after Mirror = %s, %v\nwant %s", p, describe(cp), err, describe(m.want()))
		}
	}
	if _, err := os.Stat(logPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the log is still there after Mirror: %v", err)
	}
	// An agent that reads the first file only.
	alone := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := os.WriteFile(alone, mustRead(t, path), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(alone); err != nil || !reflect.DeepEqual(got, m.want()) {
		t.Fatalf("the first file alone = %s, %v", describe(got), err)
	}
	m.check("after Mirror")
	// The store goes on saving after a Mirror.
	m.save(map[string]*Claim{"uid-9": claimN(9)})
	m.check("a save after Mirror")
}

// TestUpgradeWithoutLog: the files of an agent before the log (the two
// snapshot files, no log) load as they are, and saves go on in the log.
func TestUpgradeWithoutLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	// The golden file of this format in the first file, an older save in
	// the other.
	if err := os.WriteFile(path, mustRead(t, filepath.Join("testdata", "v2.json")), 0o600); err != nil {
		t.Fatal(err)
	}
	older, err := encode(withBoot("older"), goldenSeq-1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".1", older, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(path)
	got, err := s.Load()
	if err != nil || !reflect.DeepEqual(got, goldenState()) {
		t.Fatalf("Load = %s, %v", describe(got), err)
	}
	c := claimN(1)
	if err := s.SaveChanges(&Changes{Claims: map[string]*Claim{c.UID: c.Clone(), "uid-gone": nil}, BootID: got.BootID, PartitionModeOn: got.PartitionModeOn}); err != nil {
		t.Fatal(err)
	}
	want := goldenState()
	want.Claims[c.UID] = c
	delete(want.Claims, "uid-gone")
	if got, err := NewStore(path).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a save: %s, %v", describe(got), err)
	}
	if _, err := os.Stat(logPath(path)); err != nil {
		t.Errorf("the save after the upgrade wrote no log: %v", err)
	}
	// The snapshot files are as the older agent left them.
	if !bytes.Equal(mustRead(t, path), mustRead(t, filepath.Join("testdata", "v2.json"))) {
		t.Error("the first file changed")
	}
}

// TestStaleLogIgnored: a log written on top of a snapshot that is no
// longer the newest (an agent before the log saved since, after a
// downgrade without a graceful stop) is not replayed on the newer one.
func TestStaleLogIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	m := newModel(t, path)
	m.save(map[string]*Claim{"uid-1": claimN(1)})
	m.save(map[string]*Claim{"uid-2": claimN(2)})
	// The older agent loads the newest snapshot (without the log's claims)
	// and saves twice, as it did: whole snapshots, alternating.
	old := NewStore(path)
	for _, id := range []string{"old-1", "old-2"} {
		cp := New()
		cp.BootID = id
		data, err := encode(cp, old.seqForTest(t)+1)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(slotPaths(path)[old.next], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := NewStore(path).Load()
	if err != nil || got.BootID != "old-2" || len(got.Claims) != 0 {
		t.Fatalf("Load = %s, %v; want the older agent's last save, without the log's claims", describe(got), err)
	}
}

// seqForTest scans the files as a fresh store does and returns the newest
// snapshot's sequence (the older agent's view: snapshots only).
func (s *Store) seqForTest(t *testing.T) uint64 {
	t.Helper()
	slots, err := readSlots(s.path)
	if err != nil {
		t.Fatal(err)
	}
	s.use(slots, newest(slots))
	return s.seq
}
