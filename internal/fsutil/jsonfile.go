package fsutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// The agent's state on disk is small JSON records written whole into a
// state directory and listed back: the simulator's partition state and
// loads, the MPS daemons' records, the memory limit hook's records. These
// are the one way to do that.

// ErrCorrupt is wrapped by ReadJSON's error for a file that exists but does
// not decode: a torn or foreign file, which each caller decides how to
// treat (start over, or refuse).
var ErrCorrupt = errors.New("not valid JSON")

// WriteJSON encodes v (indented by two spaces where indent) and writes it
// to path atomically with WriteFileAtomic: a crash leaves the old record or
// the new one, never half of one.
func WriteJSON(path string, v any, indent bool, perm fs.FileMode) error {
	var (
		data []byte
		err  error
	)
	if indent {
		data, err = json.MarshalIndent(v, "", "  ")
	} else {
		data, err = json.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFileAtomic(path, data, perm)
}

// ReadJSON decodes the record at path into v. found is false, with no
// error, where there is no file; a file that does not decode is an error
// naming it, wrapping ErrCorrupt.
func ReadJSON(path string, v any) (found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return true, fmt.Errorf("%s: %w: %w", path, ErrCorrupt, err)
	}
	return true, nil
}

// ListNames returns the names of dir's entries that end in ext and are not
// directories or hidden (a temp file of WriteFileAtomic's, a lock), sorted;
// a missing directory lists none.
func ListNames(dir, ext string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ext) {
			continue
		}
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out, nil
}
