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

// vendorRuleHomes are where code may ask "which vendor" or "which kind of
// partition": the vendor packages that own every vendor rule, the backends
// and the simulator that speak each vendor's hardware, the inventory that
// names them, and alloctest, whose reference layouts are NVIDIA's own.
var vendorRuleHomes = []string{
	"internal/gpuvendor/", "internal/backend/", "internal/sim/", "internal/inventory/", "internal/alloctest/",
}

// vendorNames are the inventory's names of vendors and partition kinds.
var vendorNames = map[string]bool{"VendorNVIDIA": true, "VendorAMD": true, "PartitionMIG": true, "PartitionXCP": true}

// TestVendorRulesInVendorPackages: no product code outside vendorRuleHomes
// names a vendor or a partition kind of the inventory; what differs by
// vendor is asked of gpuvendor.Vendor (its capabilities, nodes,
// environment, own CDI spec, collective library).
func TestVendorRulesInVendorPackages(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	var found []string
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() || !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || home(rel) {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && vendorNames[sel.Sel.Name] {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "inventory" {
						found = append(found, fset.Position(sel.Pos()).String()+": inventory."+sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range found {
		t.Errorf("%s: a vendor rule outside the vendor packages; ask gpuvendor.Vendor", f)
	}
}

func home(rel string) bool {
	for _, h := range vendorRuleHomes {
		if strings.HasPrefix(rel, h) {
			return true
		}
	}
	return false
}
