package fsutil

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// leftovers lists the temp files WriteFileAtomic may have left in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWriteFileAtomic(t *testing.T) {
	tests := []struct {
		name     string
		existing []byte // nil: no file before the write
		data     []byte
		perm     os.FileMode
	}{
		{name: "new file", data: []byte("hello"), perm: 0o644},
		{name: "replace", existing: []byte("old content, longer than new"), data: []byte("new"), perm: 0o600},
		{name: "empty data", existing: []byte("x"), data: []byte{}, perm: 0o640},
		// The umask must not apply: the mode is exactly perm.
		{name: "world writable mode kept", data: []byte("m"), perm: 0o666},
	}
	writers := map[string]func(string, []byte, os.FileMode) error{"WriteFileAtomic": WriteFileAtomic}
	for _, tt := range tests {
		for wname, write := range writers {
			t.Run(tt.name+"/"+wname, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "f.json")
				if tt.existing != nil {
					if err := os.WriteFile(path, tt.existing, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := write(path, tt.data, tt.perm); err != nil {
					t.Fatalf("%s: %v", wname, err)
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tt.data) {
					t.Errorf("content = %q, want %q", got, tt.data)
				}
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != tt.perm {
					t.Errorf("mode = %v, want %v", st.Mode().Perm(), tt.perm)
				}
				if l := leftovers(t, dir); len(l) != 0 {
					t.Errorf("temp files left: %v", l)
				}
			})
		}
	}
}

func TestWriteFileAtomicFailuresLeaveNoTrace(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares dir and returns the target path.
		setup func(t *testing.T, dir string) string
		// wantOld is the content path must still hold afterwards; nil
		// means path must not be a regular file.
		wantOld []byte
		wantErr error
	}{
		{
			// Renaming a file over a non-empty directory fails after the
			// temp file is fully written: the late-failure path.
			name: "rename fails",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "f.json")
				if err := os.MkdirAll(filepath.Join(p, "child"), 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			},
		},
		{
			name: "directory missing",
			setup: func(t *testing.T, dir string) string {
				return filepath.Join(dir, "missing", "f.json")
			},
			wantErr: os.ErrNotExist,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tt.setup(t, dir)
			err := WriteFileAtomic(path, []byte("new"), 0o644)
			if err == nil {
				t.Fatal("want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v does not wrap %v", err, tt.wantErr)
			}
			if l := leftovers(t, filepath.Dir(path)); len(l) != 0 {
				t.Errorf("temp files left: %v", l)
			}
			st, statErr := os.Stat(path)
			switch {
			case tt.wantOld != nil:
				got, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(got, tt.wantOld) {
					t.Errorf("previous file = %q, %v; want %q kept", got, err, tt.wantOld)
				}
			case statErr == nil && st.Mode().IsRegular():
				t.Errorf("%s exists as a file after a failed write", path)
			}
		})
	}
}

// Concurrent writers of one path each use their own temp file, so the file
// always holds one writer's complete data.
func TestWriteFileAtomicConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	const writers = 16
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 64<<10) }
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- WriteFileAtomic(path, payload(i), 0o644)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ok := false
	for i := range writers {
		if bytes.Equal(got, payload(i)) {
			ok = true
		}
	}
	if !ok {
		t.Errorf("file holds a mix of writers (%d bytes)", len(got))
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temp files left: %v", l)
	}
}

func TestSyncDirMissing(t *testing.T) {
	if err := SyncDir(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SyncDir(missing) = %v, want ErrNotExist", err)
	}
}

// TestRemoveTemps: the temps of a killed write go, the file itself and
// other files' temps stay.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{ // name: removed by RemoveTemps(dir/a.json)
		"a.json":             false,
		".a.json.12345.tmp":  true,
		".a.json.999.tmp":    true,
		".b.json.12345.tmp":  false,
		"a.json.12345.tmp":   false,
		".a.jsonx.12345.tmp": false,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveTemps(filepath.Join(dir, "a.json")); err != nil {
		t.Fatal(err)
	}
	for name, gone := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", name, os.IsNotExist(err), gone)
		}
	}
	if err := RemoveAllTemps(dir, "*.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".b.json.12345.tmp")); !os.IsNotExist(err) {
		t.Errorf("RemoveAllTemps left .b.json's temp: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.json")); err != nil {
		t.Errorf("RemoveAllTemps removed a.json: %v", err)
	}
}
