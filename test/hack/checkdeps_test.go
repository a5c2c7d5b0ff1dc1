// Package hack tests the repository's hack/ scripts that gate a build.
package hack

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const script = "../../hack/check-build-deps.sh"

// run runs the check with env added to a minimal environment; it returns
// the exit code and what it printed.
func run(t *testing.T, env ...string) (int, string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, script)
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// pathWith is a PATH holding only the named tools, linked from the host's.
func pathWith(t *testing.T, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s must be installed to run this test: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + dir
}

// fakeLibseccomp is a pkg-config directory where libseccomp is found.
func fakeLibseccomp(t *testing.T) string {
	dir := t.TempDir()
	pc := "Name: libseccomp\nDescription: test\nVersion: 2.5.4\nLibs: -lseccomp\nCflags:\n"
	if err := os.WriteFile(filepath.Join(dir, "libseccomp.pc"), []byte(pc), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckBuildDeps(t *testing.T) {
	withSeccomp := fakeLibseccomp(t)
	empty := t.TempDir()
	tests := []struct {
		name string
		env  []string
		// want is "" for a pass, else what the one line must name.
		want []string
	}{
		{
			name: "all there",
			env:  []string{pathWith(t, "gcc", "pkg-config"), "PKG_CONFIG_LIBDIR=" + withSeccomp},
		},
		{
			name: "libseccomp hidden from pkg-config",
			env:  []string{pathWith(t, "gcc", "pkg-config"), "PKG_CONFIG_LIBDIR=" + empty, "PKG_CONFIG_PATH="},
			want: []string{"libseccomp", "apt-get install libseccomp-dev"},
		},
		{
			name: "no pkg-config",
			env:  []string{pathWith(t, "gcc")},
			want: []string{"pkg-config", "apt-get install pkg-config libseccomp-dev"},
		},
		{
			name: "no C compiler",
			env:  []string{pathWith(t, "pkg-config"), "PKG_CONFIG_LIBDIR=" + withSeccomp},
			want: []string{"C compiler", "apt-get install gcc libc6-dev"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := run(t, tt.env...)
			if tt.want == nil {
				if code != 0 || out != "" {
					t.Fatalf("exit %d, output %q; want a silent pass", code, out)
				}
				return
			}
			if code != 1 {
				t.Errorf("exit %d, want 1 (output %q)", code, out)
			}
			if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 1 {
				t.Errorf("printed %d lines, want one: %q", len(lines), out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q does not name %q", out, w)
				}
			}
		})
	}
}
