package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed = true }
func (r *recorder) Helper()               {}

func TestCompare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "want.txt")
	r := &recorder{TB: t}
	Compare(r, path, []byte("x"))
	if !r.failed {
		t.Error("a missing golden file passed")
	}
	*update = true
	Compare(t, path, []byte("abc\n"))
	*update = false
	if data, err := os.ReadFile(path); err != nil || string(data) != "abc\n" {
		t.Fatalf("-update wrote %q, %v", data, err)
	}
	Compare(t, path, []byte("abc\n"))
	r = &recorder{TB: t}
	Compare(r, path, []byte("abd\n"))
	if !r.failed {
		t.Error("different bytes passed")
	}
}
