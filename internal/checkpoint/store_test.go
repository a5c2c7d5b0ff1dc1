package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		cp   *Checkpoint
	}{
		{name: "empty", cp: New()},
		{name: "nil claims map", cp: &Checkpoint{Version: CurrentVersion}},
		{name: "claims in every state", cp: sample()},
		// Save writes the current version whatever the caller set.
		{name: "version unset", cp: func() *Checkpoint { c := sample(); c.Version = 0; return c }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A directory that does not exist yet: Save creates it.
			path := filepath.Join(t.TempDir(), "plugin", "checkpoint.json")
			s := NewStore(path)
			before := tt.cp.Clone()
			if err := s.Save(tt.cp); err != nil {
				t.Fatalf("Save: %v", err)
			}
			if !reflect.DeepEqual(tt.cp, before) {
				t.Error("Save modified its argument")
			}
			got, err := s.Load()
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := before.Clone()
			want.Version = CurrentVersion
			if want.Claims == nil {
				want.Claims = map[string]*Claim{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Load:\n got %+v\nwant %+v", got, want)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", st.Mode().Perm())
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	cp, err := NewStore(filepath.Join(t.TempDir(), "nope.json")).Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cp, New()) {
		t.Errorf("got %+v, want an empty checkpoint", cp)
	}
}

// Load of a file that exists but cannot be read is not "corrupt": the file
// may be fine, so it is neither moved nor replaced by an empty checkpoint.
func TestLoadUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := os.Mkdir(path, 0o755); err != nil { // reading a directory fails
		t.Fatal(err)
	}
	cp, err := NewStore(path).Load()
	if err == nil || errors.Is(err, ErrCorrupt) || cp != nil {
		t.Fatalf("Load = %v, %v; want nil and a non-corrupt error", cp, err)
	}
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		t.Error("unreadable path was moved")
	}
}

// encodeRaw writes cp exactly as given (any version) with a valid checksum.
func encodeRaw(t *testing.T, cp *Checkpoint) []byte {
	t.Helper()
	data, err := encode(cp, 1)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoadCorrupt(t *testing.T) {
	good := encodeRaw(t, sample())
	future := sample()
	future.Version = CurrentVersion + 1
	// A checkpoint whose checksum matches but whose entries are inconsistent.
	misfiled := func() []byte {
		payload := []byte(`{"version":1,"claims":{"uid-a":{"uid":"uid-z","namespace":"n","name":"c","state":"PrepareCompleted","updated":"2026-01-01T00:00:00Z"}}}`)
		data, _ := json.Marshal(envelope{Checksum: checksum(payload), Checkpoint: payload})
		return data
	}()

	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{name: "empty file", data: []byte{}, wantErr: "parse"},
		{name: "truncated", data: good[:len(good)/2], wantErr: "parse"},
		{name: "not JSON", data: []byte("\x00\x01garbage"), wantErr: "parse"},
		{name: "no envelope", data: []byte(`{"version":1,"claims":{}}`), wantErr: "no checksum"},
		// One changed byte inside a value still parses; only the checksum
		// catches it.
		{name: "flipped byte", data: bytes.Replace(good, []byte(`ns-a`), []byte(`ns-q`), 1), wantErr: "checksum mismatch"},
		{name: "bad checksum text", data: bytes.Replace(good, []byte(`sha256:`), []byte(`sha256:0`), 1), wantErr: "checksum mismatch"},
		{name: "unknown version", data: encodeRaw(t, future), wantErr: fmt.Sprintf("unknown version %d", CurrentVersion+1)},
		{name: "misfiled claim", data: misfiled, wantErr: "filed under"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "checkpoint.json")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s := NewStore(path)
			cp, err := s.Load()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load error = %v, want ErrCorrupt containing %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(cp, New()) {
				t.Errorf("Load returned %+v, want an empty checkpoint", cp)
			}

			// Moved aside with its content intact, for a person to look at.
			aside, _ := filepath.Glob(path + ".corrupt-*")
			if len(aside) != 1 {
				t.Fatalf("moved-aside files: %v", aside)
			}
			if kept, _ := os.ReadFile(aside[0]); !bytes.Equal(kept, tt.data) {
				t.Error("moved-aside file differs from the corrupt one")
			}
			if !strings.Contains(err.Error(), aside[0]) {
				t.Errorf("error does not name %s: %v", aside[0], err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("corrupt file still at %s", path)
			}

			// The next start sees no file, and a fresh save works.
			if cp, err := s.Load(); err != nil || len(cp.Claims) != 0 {
				t.Fatalf("second Load = %+v, %v", cp, err)
			}
			if err := s.Save(sample()); err != nil {
				t.Fatalf("Save after corrupt: %v", err)
			}
			got, err := s.Load()
			if err != nil || !reflect.DeepEqual(got, sample()) {
				t.Errorf("Load after fresh Save = %+v, %v", got, err)
			}
		})
	}
}

func TestSaveRejectsInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	s := NewStore(path)
	if err := s.Save(sample()); err != nil {
		t.Fatal(err)
	}
	bad := sample()
	bad.Claims["uid-a"].State = "Nonsense"
	if err := s.Save(bad); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Save(invalid) = %v, want an error naming the file", err)
	}
	if err := s.Save(nil); err == nil {
		t.Fatal("Save(nil) succeeded")
	}
	if got, err := s.Load(); err != nil || !reflect.DeepEqual(got, sample()) {
		t.Errorf("failed saves changed the file: %+v, %v", got, err)
	}
}

// Saves and loads from many goroutines must leave one complete checkpoint,
// never a mix, and every Load in between must see a valid one.
func TestConcurrentSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	s := NewStore(path)
	const writers = 16
	want := make([]*Checkpoint, writers)
	for i := range want {
		cp := sample()
		cp.BootID = fmt.Sprintf("boot-%d", i)
		for j := range 20 * i {
			uid := fmt.Sprintf("uid-%d-%d", i, j)
			cp.Claims[uid] = &Claim{UID: uid, Namespace: "ns", Name: uid, State: PrepareCompleted, Updated: t0}
		}
		want[i] = cp
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*writers)
	for i := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 3 {
				if err := s.Save(want[i]); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := s.Load(); err != nil {
				errs <- fmt.Errorf("Load during saves: %w", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range want {
		if reflect.DeepEqual(got, w) {
			found = true
		}
	}
	if !found {
		t.Errorf("final checkpoint (boot %s, %d claims) matches no writer", got.BootID, len(got.Claims))
	}
	if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(tmp) != 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// Read decodes what Save wrote, leaves a bad file where it is, and reads a
// missing file as empty.
func TestReadIsReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	if cp, err := Read(path); err != nil || len(cp.Claims) != 0 {
		t.Fatalf("missing file: %+v %v", cp, err)
	}
	cp := New()
	cp.Claims["u"] = &Claim{UID: "u", Namespace: "n", Name: "c", State: PrepareCompleted}
	if err := NewStore(path).Save(cp); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || got.Claims["u"].State != PrepareCompleted {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("{bad"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Fatal("bad file read without error")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Read moved the bad file: %v", err)
	}
}

// Agents before the compact envelope wrote the file indented; an upgraded
// agent reads it.
func TestLoadIndented(t *testing.T) {
	var indented bytes.Buffer
	if err := json.Indent(&indented, encodeRaw(t, sample()), "", "  "); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := os.WriteFile(path, indented.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := NewStore(path).Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, sample())
	}
}

// withBoot is sample() with a boot ID naming which save it is.
func withBoot(id string) *Checkpoint {
	cp := sample()
	cp.BootID = id
	return cp
}

// TestSavesAlternate: saves go to the two files in turn, each with a
// higher sequence, and Load and Read return the newest.
func TestSavesAlternate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	s := NewStore(path)
	files := slotPaths(path)
	for i := range 5 {
		if err := s.Save(withBoot(fmt.Sprint("save-", i))); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(files[i%2])
		if err != nil {
			t.Fatalf("save %d did not write %s: %v", i, files[i%2], err)
		}
		cp, seq, err := decode(data)
		if err != nil || cp.BootID != fmt.Sprint("save-", i) || seq != uint64(i+1) {
			t.Fatalf("save %d: %s holds %v seq %d, %v", i, files[i%2], cp, seq, err)
		}
		for _, load := range []func() (*Checkpoint, error){NewStore(path).Load, func() (*Checkpoint, error) { return Read(path) }} {
			if got, err := load(); err != nil || got.BootID != fmt.Sprint("save-", i) {
				t.Fatalf("after save %d: loaded %v, %v", i, got, err)
			}
		}
	}
}

// TestCutShortSave: an agent killed in the middle of a save leaves that
// file torn (here: empty, or half written); the other file still holds
// the last completed save, which Load returns without an error, and the
// next save overwrites the torn file.
func TestCutShortSave(t *testing.T) {
	for name, torn := range map[string]func(third, first []byte) []byte{
		"nothing written yet": func(_, _ []byte) []byte { return nil },
		"half written":        func(third, _ []byte) []byte { return third[:len(third)/2] },
		// Written in place: the new start (checksum, sequence 3) over what
		// is left of the old (the first save's boot ID onwards).
		"new start, old end": func(third, first []byte) []byte {
			cut := bytes.Index(third, []byte(`"bootID"`))
			return append(slices.Clone(third[:cut]), first[cut:]...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			s := NewStore(path)
			for _, id := range []string{"first", "second"} {
				if err := s.Save(withBoot(id)); err != nil {
					t.Fatal(err)
				}
			}
			// The third save goes to the first file again; cut it short.
			third, err := encode(withBoot("third"), 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, torn(third, mustRead(t, path)), 0o600); err != nil {
				t.Fatal(err)
			}
			s2 := NewStore(path)
			got, err := s2.Load()
			if err != nil || got.BootID != "second" {
				t.Fatalf("Load after a cut-short save = %v, %v; want the second save", got, err)
			}
			if aside, _ := filepath.Glob(path + "*.corrupt-*"); len(aside) != 0 {
				t.Errorf("a cut-short save was moved aside as corrupt: %v", aside)
			}
			if err := s2.Save(withBoot("fourth")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := decode(mustRead(t, path)); err != nil {
				t.Errorf("the next save did not overwrite the torn file: %v", err)
			}
			if got, err := NewStore(path).Load(); err != nil || got.BootID != "fourth" {
				t.Fatalf("Load = %v, %v; want the fourth save", got, err)
			}
		})
	}
}

// A save that fails leaves the newest state where it was, and the next
// save writes the same file again.
func TestFailedSaveRetriesSameFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	s := NewStore(path)
	if err := s.Save(withBoot("first")); err != nil {
		t.Fatal(err)
	}
	second := slotPaths(path)[1]
	if err := os.MkdirAll(filepath.Join(second, "x"), 0o755); err != nil { // a directory squats on it
		t.Fatal(err)
	}
	if err := s.Save(withBoot("second")); err == nil || !strings.Contains(err.Error(), second) {
		t.Fatalf("Save over a directory = %v, want an error naming %s", err, second)
	}
	if cp, _, err := decode(mustRead(t, path)); err != nil || cp.BootID != "first" {
		t.Fatalf("after a failed save the first file holds %v, %v", cp, err)
	}
	if err := os.RemoveAll(second); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(withBoot("third")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(second); err != nil {
		t.Errorf("the retried save did not write %s: %v", second, err)
	}
	if got, err := Read(path); err != nil || got.BootID != "third" {
		t.Fatalf("after the retry: %v, %v", got, err)
	}
}

// Files of an agent before the two files: one, no sequence. An upgraded
// agent loads it and saves into the other file; Mirror at a graceful stop
// leaves the first file current for an agent downgraded again.
func TestOneFileAgents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	old, err := encode(withBoot("old"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(old, []byte("sequence")) {
		t.Fatalf("sequence 0 is written: %s", old)
	}
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(path)
	if got, err := s.Load(); err != nil || got.BootID != "old" {
		t.Fatalf("Load of a one-file checkpoint = %v, %v", got, err)
	}
	if err := s.Save(withBoot("new")); err != nil {
		t.Fatal(err)
	}
	// What a one-file agent reads: the first file, still the old state.
	if cp, _, err := decode(mustRead(t, path)); err != nil || cp.BootID != "old" {
		t.Fatalf("first file = %v, %v", cp, err)
	}
	if err := s.Mirror(); err != nil {
		t.Fatal(err)
	}
	if cp, _, err := decode(mustRead(t, path)); err != nil || cp.BootID != "new" {
		t.Fatalf("first file after Mirror = %v, %v; want the newest state", cp, err)
	}
	if got, err := NewStore(path).Load(); err != nil || got.BootID != "new" {
		t.Fatalf("Load after Mirror = %v, %v", got, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Neither file valid: both are moved aside, and Load reports ErrCorrupt
// naming each.
func TestBothFilesCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	for _, p := range slotPaths(path) {
		if err := os.WriteFile(p, []byte("{torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := NewStore(path)
	cp, err := s.Load()
	if !errors.Is(err, ErrCorrupt) || !reflect.DeepEqual(cp, New()) {
		t.Fatalf("Load = %v, %v; want an empty checkpoint and ErrCorrupt", cp, err)
	}
	for _, p := range slotPaths(path) {
		if aside, _ := filepath.Glob(p + ".corrupt-*"); len(aside) != 1 || !strings.Contains(err.Error(), aside[0]) {
			t.Errorf("%s moved aside to %v; error %v", p, aside, err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there", p)
		}
	}
	if err := s.Save(withBoot("fresh")); err != nil {
		t.Fatal(err)
	}
	if got, err := NewStore(path).Load(); err != nil || got.BootID != "fresh" {
		t.Fatalf("Load after a fresh save = %v, %v", got, err)
	}
}

// Upgraded, downgraded, upgraded again: the one-file agent in between
// wrote the first file without a sequence; it holds the newest state if it
// was modified after the other file, whatever that file's sequence.
func TestDowngradeThenUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name       string
		oldIsNewer bool
		sameTime   bool
	}{{"one-file agent wrote last", true, false}, {"two-file agent wrote last", false, false}, {"same time: the file with a sequence", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			s := NewStore(path)
			for _, id := range []string{"first", "second", "third"} {
				if err := s.Save(withBoot(id)); err != nil {
					t.Fatal(err)
				}
			}
			old, err := encode(withBoot("one-file"), 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, old, 0o600); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			oldTime, otherTime := now, now.Add(-time.Minute)
			if !tc.oldIsNewer {
				oldTime, otherTime = otherTime, now
			}
			if tc.sameTime {
				oldTime, otherTime = now, now
			}
			if err := os.Chtimes(path, oldTime, oldTime); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path+".1", otherTime, otherTime); err != nil {
				t.Fatal(err)
			}
			want := "second" // in the other file, sequence 2
			if tc.oldIsNewer {
				want = "one-file"
			}
			if got, err := NewStore(path).Load(); err != nil || got.BootID != want {
				t.Fatalf("Load = %v, %v; want %s", got, err, want)
			}
		})
	}
}
