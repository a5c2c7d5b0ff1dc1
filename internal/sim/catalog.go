package sim

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// catalogFS holds the built-in machines; each file's figures cite their
// public sources in comments.
//
//go:embed catalog/*.yaml
var catalogFS embed.FS

// CatalogNames returns the names of the built-in machines, sorted.
func CatalogNames() []string {
	entries, err := fs.ReadDir(catalogFS, "catalog")
	if err != nil {
		// The directory is embedded at build time; failing here is a bug.
		panic(fmt.Sprintf("sim: reading embedded catalogue: %v", err))
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Profile loads a machine for nodeName: nameOrPath is a built-in catalogue
// name (dgx-h100) or the path of a machine file (./my-box.yaml). An unknown
// name fails with the list of built-in names.
func Profile(nameOrPath string, nodeName string) (*Machine, error) {
	if data, err := catalogFS.ReadFile(path.Join("catalog", nameOrPath+".yaml")); err == nil && !strings.ContainsAny(nameOrPath, `/\`) {
		return LoadMachine(nameOrPath+".yaml", data, nodeName)
	}
	if looksLikePath(nameOrPath) {
		data, err := os.ReadFile(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("reading machine file: %w", err)
		}
		return LoadMachine(filepath.Base(nameOrPath), data, nodeName)
	}
	return nil, fmt.Errorf("unknown sim profile %q; available: %s (or the path of a .yaml machine file)", nameOrPath, strings.Join(CatalogNames(), ", "))
}

func looksLikePath(s string) bool {
	return strings.ContainsAny(s, `/\`) || strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml")
}
