package repofiles

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sizeLimit is the size above which a tracked file must say why it is
// there (a SOURCE.md beside it, or in a parent, that names it).
const sizeLimit = 1 << 20

// binaryMagic are the first bytes of executables and object files: ELF,
// Mach-O (both byte orders, 32 and 64 bit, and fat) and PE.
var binaryMagic = [][]byte{
	{0x7f, 'E', 'L', 'F'},
	{0xcf, 0xfa, 0xed, 0xfe}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xfe, 0xed, 0xfa, 0xce}, {0xca, 0xfe, 0xba, 0xbe},
	{'M', 'Z'},
}

// TestNoBuildOutputTracked: git tracks no executable or object file (build
// outputs go to bin/ and _output/, which .gitignore keeps out), and no file
// over 1 MiB without a SOURCE.md naming it.
func TestNoBuildOutputTracked(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files: not this repository's checkout?", len(files))
	}
	for _, f := range files {
		if msg := checkFile(root, f); msg != "" {
			t.Error(msg)
		}
	}
}

// TestCheckFile: the check finds what it is for, and passes the rest.
func TestCheckFile(t *testing.T) {
	root := t.TempDir()
	write := func(name string, b []byte) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("x"), sizeLimit+1)
	write("tessera-cdi-hook", append([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1}, make([]byte, 64)...))
	write("tool.exe", []byte("MZ\x90\x00"))
	write("hack/run.sh", []byte("#!/bin/sh\necho hi\n"))
	write("testdata/dump.json", big)
	write("fixtures/capture.bin", big)
	write("fixtures/SOURCE.md", []byte("capture.bin: a real capture, 1.2 MiB, kept whole because ...\n"))
	write("fixtures/sub/deep.bin", big)
	write("small.txt", []byte("hello"))
	for _, tc := range []struct {
		file, want string
	}{
		{"tessera-cdi-hook", "executable"},
		{"tool.exe", "executable"},
		{"hack/run.sh", ""},
		{"testdata/dump.json", "over 1 MiB"},
		{"fixtures/capture.bin", ""},
		{"fixtures/sub/deep.bin", "over 1 MiB"},
		{"small.txt", ""},
	} {
		got := checkFile(root, tc.file)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.file, got, tc.want)
		}
	}
}

// checkFile is what is wrong with the tracked file f, "" when nothing.
func checkFile(root, f string) string {
	p := filepath.Join(root, filepath.FromSlash(f))
	fh, err := os.Open(p)
	if err != nil {
		return "" // deleted in the work tree, not yet in the index
	}
	defer fh.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(fh, head)
	for _, m := range binaryMagic {
		if n >= len(m) && bytes.Equal(head[:len(m)], m) {
			return f + ": an executable or object file is tracked; build outputs go to bin/ or _output/"
		}
	}
	st, err := fh.Stat()
	if err != nil || st.Size() <= sizeLimit {
		return ""
	}
	name := filepath.Base(p)
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "SOURCE.md")); err == nil && bytes.Contains(b, []byte(name)) {
			return ""
		}
		if d == root || d == filepath.Dir(d) {
			break
		}
	}
	return f + ": over 1 MiB with no SOURCE.md beside it (or in a parent) that names it and says why"
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	return strings.TrimSpace(string(out))
}
