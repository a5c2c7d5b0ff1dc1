package amdsysfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// sharedMI308X is the real KFD capture of an 8x MI308X host in CPX mode,
// from ROCm/k8s-device-plugin testdata (see its SOURCE.md).
var sharedMI308X = fixture("mi308x-cpx")

func fixture(name string) string { return filepath.Join(fixturesDir, name) }

func discover(t *testing.T, root string) *inventory.Node {
	t.Helper()
	n, _ := discoverLogged(t, root)
	return n
}

// copyTree copies a fixture (keeping symlinks) so a test can break it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case info.IsDir():
			return os.MkdirAll(out, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
