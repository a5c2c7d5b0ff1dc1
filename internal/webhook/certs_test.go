package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// served is the serial of the certificate GetCertificate returns.
func served(t *testing.T, r *CertReloader) int64 {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || c.Leaf == nil {
		t.Fatal("no certificate")
	}
	return c.Leaf.SerialNumber.Int64()
}

func TestCertReloader(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ca := newTestCA(t)

	t.Run("rotation in place", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := ca.pair(t, dir, 1, 1)
		r, err := NewCertReloader(logger, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		if s := served(t, r); s != 1 {
			t.Fatalf("serial %d, want 1", s)
		}
		ca.pair(t, dir, 2, 2)
		if s := served(t, r); s != 2 {
			t.Errorf("after rotation: serial %d, want 2", s)
		}
		if s := served(t, r); s != 2 {
			t.Errorf("unchanged files: serial %d, want 2", s)
		}
	})

	t.Run("half-done rotation serves the previous pair", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := ca.pair(t, dir, 1, 1)
		r, err := NewCertReloader(logger, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c, k := ca.issue(t, 2, time.Now().Add(time.Hour))
		writeVersion(t, certFile, c, 2) // the new certificate, the old key
		if s := served(t, r); s != 1 {
			t.Errorf("certificate without its key: serial %d, want the previous 1", s)
		}
		if err := r.Ready(); err != nil {
			t.Errorf("ready while the previous pair serves: %v", err)
		}
		writeVersion(t, keyFile, k, 2)
		if s := served(t, r); s != 2 {
			t.Errorf("key written too: serial %d, want 2", s)
		}
	})

	t.Run("files removed serves the previous pair", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := ca.pair(t, dir, 1, 1)
		r, err := NewCertReloader(logger, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(keyFile); err != nil {
			t.Fatal(err)
		}
		if s := served(t, r); s != 1 {
			t.Errorf("serial %d, want the previous 1", s)
		}
		ca.pair(t, dir, 3, 3)
		if s := served(t, r); s != 3 {
			t.Errorf("files back: serial %d, want 3", s)
		}
	})

	t.Run("broken, fixed, broken again", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := ca.pair(t, dir, 1, 1)
		good, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewCertReloader(logger, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		writeVersion(t, certFile, []byte("garbage"), 2)
		if s := served(t, r); s != 1 {
			t.Errorf("garbage: serial %d, want 1", s)
		}
		writeVersion(t, certFile, good, 1) // the loaded version again
		if s := served(t, r); s != 1 {
			t.Errorf("restored: serial %d, want 1", s)
		}
		writeVersion(t, certFile, []byte("garbage"), 2)
		if s := served(t, r); s != 1 {
			t.Errorf("garbage again: serial %d, want 1", s)
		}
	})

	t.Run("Secret volume symlink swap", func(t *testing.T) {
		// The kubelet's atomic writer: tls.crt -> ..data/tls.crt, ..data ->
		// a timestamped directory; a rotation writes a new directory and
		// renames a new ..data link over the old one.
		dir := t.TempDir()
		v1, v2 := filepath.Join(dir, "..2026_01_01_v1"), filepath.Join(dir, "..2026_01_01_v2")
		for _, d := range []string{v1, v2} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		ca.pair(t, v1, 1, 1)
		if err := os.Symlink(filepath.Base(v1), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"tls.crt", "tls.key"} {
			if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		r, err := NewCertReloader(logger, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil {
			t.Fatal(err)
		}
		if s := served(t, r); s != 1 {
			t.Fatalf("serial %d, want 1", s)
		}
		ca.pair(t, v2, 2, 2)
		if err := os.Symlink(filepath.Base(v2), filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if s := served(t, r); s != 2 {
			t.Errorf("after the swap: serial %d, want 2", s)
		}
	})

	t.Run("start without files fails", func(t *testing.T) {
		dir := t.TempDir()
		_, err := NewCertReloader(logger, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err == nil || !strings.Contains(err.Error(), "tls.crt") {
			t.Errorf("err %v, want one naming tls.crt", err)
		}
	})

	t.Run("start with a mismatched pair fails", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := ca.pair(t, dir, 1, 1)
		_, k := ca.issue(t, 2, time.Now().Add(time.Hour))
		writeVersion(t, keyFile, k, 2)
		_, err := NewCertReloader(logger, certFile, keyFile)
		if err == nil || !strings.Contains(err.Error(), "load serving certificate") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("expired is not ready", func(t *testing.T) {
		dir := t.TempDir()
		c, k := ca.issue(t, 1, time.Now().Add(-time.Minute))
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		writeVersion(t, certFile, c, 1)
		writeVersion(t, keyFile, k, 1)
		r, err := NewCertReloader(logger, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Errorf("Ready: %v, want expired", err)
		}
		ca.pair(t, dir, 2, 2)
		if err := r.Ready(); err != nil {
			t.Errorf("Ready after rotation: %v", err)
		}
	})
}
