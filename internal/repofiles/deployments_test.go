package repofiles

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoGoUnderDeployments: deployments/ holds what an operator installs
// (the chart, the Dockerfile, the krew manifest), no Go package that
// product code could import; data the code embeds lives with its package
// under internal/ (internal/deviceclasses).
func TestNoGoUnderDeployments(t *testing.T) {
	root := repoRoot(t)
	err := filepath.WalkDir(filepath.Join(root, "deployments"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: Go code under deployments/; move it under internal/", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
