package version_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinariesAnswerVersion: every binary in cmd/, built as the Makefile
// builds it (-ldflags -X of this package's variables), prints its name and
// the stamped version, commit and date for --version (kubectl-tessera for
// its version subcommand too) and exits 0.
func TestBinariesAnswerVersion(t *testing.T) {
	root := "../.."
	cmds, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	const pkg = "github.com/tessera-gpu/tessera/internal/version"
	ldflags := "-X " + pkg + ".version=v9.8.7-test -X " + pkg + ".commit=0123456789abcdef -X " + pkg + ".buildDate=2026-12-24T00:00:00Z"
	dir := t.TempDir()
	build := exec.Command("go", "build", "-ldflags="+ldflags, "-o", dir+"/", "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := " v9.8.7-test (commit 0123456789abcdef, built 2026-12-24T00:00:00Z, go"
	n := 0
	for _, c := range cmds {
		if !c.IsDir() {
			continue
		}
		n++
		runs := [][]string{{"--version"}}
		if c.Name() == "kubectl-tessera" {
			runs = append(runs, []string{"version"})
		}
		for _, args := range runs {
			out, err := exec.Command(filepath.Join(dir, c.Name()), args...).Output()
			if err != nil {
				t.Errorf("%s %s: %v", c.Name(), args, err)
				continue
			}
			if got := string(out); !strings.HasPrefix(got, c.Name()+want) {
				t.Errorf("%s %s printed %q, want %q...", c.Name(), args, got, c.Name()+want)
			}
		}
	}
	if n != 5 {
		t.Errorf("cmd/ holds %d binaries, the docs say five", n)
	}
}
