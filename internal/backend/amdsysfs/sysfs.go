package amdsysfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// fsRoot reads sysfs files below a root directory. Every error names the
// file, so a log line says exactly which part of a host's tree is broken.
type fsRoot string

func (r fsRoot) path(rel string) string { return filepath.Join(string(r), rel) }

// maxFileSize bounds sysfs reads: real attribute files are one page.
const maxFileSize = 64 << 10

func (r fsRoot) read(rel string) ([]byte, error) {
	p := r.path(rel)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	defer f.Close()
	buf := make([]byte, maxFileSize+1)
	n, err := readFull(f, buf)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if n > maxFileSize {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", p, maxFileSize)
	}
	return buf[:n], nil
}

func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		if m == 0 {
			return n, nil
		}
	}
	return n, nil
}

func (r fsRoot) readString(rel string) (string, error) {
	b, err := r.read(rel)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readInt reads a file holding one integer; base 0 accepts the 0x-prefixed
// hex of PCI vendor/device files and the decimal of numa_node.
func (r fsRoot) readInt(rel string) (int64, error) {
	s, err := r.readString(rel)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %q is not an integer", r.path(rel), truncate(s))
	}
	return v, nil
}

func (r fsRoot) readProperties(rel string) (Properties, error) {
	b, err := r.read(rel)
	if err != nil {
		return nil, err
	}
	p, err := ParseProperties(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.path(rel), err)
	}
	return p, nil
}

func (r fsRoot) exists(rel string) bool {
	_, err := os.Stat(r.path(rel))
	return err == nil
}

// numberedDirs lists the entries of dir whose names are decimal numbers
// (KFD's nodes/N, mem_banks/N, io_links/N), in numeric order.
func (r fsRoot) numberedDirs(rel string) ([]int, error) {
	entries, err := os.ReadDir(r.path(rel))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", r.path(rel), err)
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= 0 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// prefixedIndex returns the numbers N of entries named prefix+N in dir
// (drm/cardN), ascending; an unreadable dir gives none.
func (r fsRoot) prefixedIndex(rel, prefix string) []int {
	entries, err := os.ReadDir(r.path(rel))
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// resolve returns rel with symlinks resolved, relative to the root, so a
// captured tree's relative links (as sysfs has them) work under any root.
func (r fsRoot) resolve(rel string) (string, error) {
	p, err := filepath.EvalSymlinks(r.path(rel))
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", r.path(rel), err)
	}
	root, err := filepath.EvalSymlinks(string(r))
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", string(r), err)
	}
	out, err := filepath.Rel(root, p)
	if err != nil || strings.HasPrefix(out, "..") {
		return "", fmt.Errorf("resolving %s: points outside %s", r.path(rel), string(r))
	}
	return out, nil
}
