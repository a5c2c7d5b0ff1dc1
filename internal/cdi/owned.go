package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// OwnedPaths are the paths in the spec directory dir that are Tessera's:
// every claim spec file (whatever its claim) and the topology files'
// directory. Nothing else there is listed (other vendors' specs share the
// directory). For uninstall, once no claim is prepared.
func OwnedPaths(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list CDI spec directory %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir() && name == ncclTopoDirName:
		case !e.IsDir() && strings.HasPrefix(name, specFilePrefix) && strings.HasSuffix(name, specFileExt):
		case !e.IsDir() && strings.HasPrefix(name, "."+specFilePrefix):
			// A spec's temporary file, left by a crash mid-write.
		default:
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	return out, nil
}
