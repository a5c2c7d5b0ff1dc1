package repofiles

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Limits of a product file and function: a file over 600 lines does more
// than one job, a function over 80 does several steps a reader must hold
// at once; split them (docs/development.md, Style).
const (
	maxFileLines = 600
	maxFuncLines = 80
)

// TestSmallPieces: no product Go file (api/, cmd/, internal/, tests
// aside) over maxFileLines and no function over maxFuncLines.
func TestSmallPieces(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	for _, top := range []string{"api", "cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
				t.Errorf("%s: %d lines, more than %d: split it by job", rel, n, maxFileLines)
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: func %s is %d lines, more than %d: split it into steps", rel, fd.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
