package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// libDirs are where the dynamic loader of a Debian amd64 or arm64 host
// finds shared libraries (ld.so.conf.d's multiarch entries and the
// defaults); a library is added at the first of them that holds it.
var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// layout is the image's file tree: image path -> host file.
type layout map[string]string

// addProgram adds host at image and, for a dynamic ELF program, its loader
// and libraries at their host paths.
func (l *layout) addProgram(host, image string) error {
	if *l == nil {
		*l = layout{}
	}
	if _, err := os.Stat(host); err != nil {
		return fmt.Errorf("--add %s: %w", host, err)
	}
	(*l)[image] = host
	f, err := elf.Open(host)
	if err != nil {
		return nil // not an ELF file: data or a script
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return fmt.Errorf("%s: read interpreter: %w", host, err)
			}
			interp := strings.TrimRight(string(b), "\x00")
			(*l)[interp] = interp
		}
	}
	return l.addLibs(host, f)
}

// addLibs adds the DT_NEEDED libraries of f, recursively.
func (l *layout) addLibs(host string, f *elf.File) error {
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: libraries: %w", host, err)
	}
	for _, lib := range needed {
		path, err := findLib(lib)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", host, lib, err)
		}
		if _, done := (*l)[path]; done {
			continue
		}
		(*l)[path] = path
		lf, err := elf.Open(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		err = l.addLibs(path, lf)
		lf.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func findLib(lib string) (string, error) {
	for _, d := range libDirs {
		p := filepath.Join(d, lib)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.Join(libDirs, ", "))
}

// layer is the tree as one uncompressed layer: parent directories first,
// files in name order with the host file's mode and fixed times, so the
// same inputs give the same digest.
func (l layout) layer() (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	paths := make([]string, 0, len(l))
	for p := range l {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	dirs := map[string]bool{}
	for _, p := range paths {
		var parents []string
		for d := filepath.Dir(p); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(parents[i], "/") + "/", Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		data, err := os.ReadFile(l[p])
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(l[p])
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: int64(st.Mode().Perm()), Size: int64(len(data))}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}
