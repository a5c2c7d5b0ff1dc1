package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeChart(t *testing.T, path, chartYAML string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "tessera/Chart.yaml", Mode: 0o644, Size: int64(len(chartYAML))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(chartYAML)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckChart(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "tessera-0.1.0.tgz")
	writeChart(t, good, "name: tessera\nversion: 0.1.0\nappVersion: v0.1.0\n")
	if p := CheckChart(good, "v0.1.0"); len(p) != 0 {
		t.Errorf("the release's chart: %v", p)
	}
	if p := CheckChart(good, "v0.2.0"); len(p) != 3 {
		t.Errorf("another version's chart: %v, want version, appVersion and name refused", p)
	}
	old := filepath.Join(dir, "tessera-0.3.0.tgz")
	writeChart(t, old, "name: tessera\nversion: 0.3.0\nappVersion: \"0.1.0\"\n")
	if p := CheckChart(old, "v0.3.0"); len(p) != 1 || !strings.Contains(p[0].Msg, "appVersion") {
		t.Errorf("the committed appVersion: %v", p)
	}
}

func TestSums(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.tgz", "dist/b.tar.gz"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteSums(dir, []string{"dist/b.tar.gz", "a.tgz"}); err != nil {
		t.Fatal(err)
	}
	if p := CheckSums(dir, []string{"a.tgz"}); len(p) != 0 {
		t.Errorf("as written: %v", p)
	}
	if p := CheckSums(dir, []string{"a.tgz", "c.yaml"}); len(p) != 1 || !strings.Contains(p[0].Msg, "does not list c.yaml") {
		t.Errorf("an artifact left out: %v", p)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.tgz"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := CheckSums(dir, nil); len(p) != 1 || !strings.Contains(p[0].Msg, "a.tgz: sha256") {
		t.Errorf("a changed artifact: %v", p)
	}
}
