package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file, directory or symlink of a layer.
type entry struct {
	typ  byte // tar.TypeReg, TypeDir, TypeSymlink
	mode int64
	data []byte
	link string
}

// files is a layer's content by absolute path.
type files map[string]entry

func (f files) file(p string, mode int64, data []byte) {
	f[p] = entry{typ: tar.TypeReg, mode: mode, data: data}
}
func (f files) dir(p string, mode int64) { f[p] = entry{typ: tar.TypeDir, mode: mode} }
func (f files) symlink(p, target string) {
	f[p] = entry{typ: tar.TypeSymlink, mode: 0o777, link: target}
}

// tar is the layer's tarball: every parent directory present (0755),
// entries sorted by path, owner 0:0 with no names, every time mtime: the
// same files give the same bytes.
func (f files) tar(mtime time.Time) ([]byte, error) {
	all := files{}
	for p, e := range f {
		all[p] = e
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				if _, ok := f[d]; !ok {
					all.dir(d, 0o755)
				}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := all[p]
		name := strings.TrimPrefix(p, "/")
		if e.typ == tar.TypeDir {
			name += "/"
		}
		h := &tar.Header{Typeflag: e.typ, Name: name, Linkname: e.link, Mode: e.mode, Size: int64(len(e.data)),
			ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layer is the files as an OCI layer (gzip, default level).
func (f files) layer(mtime time.Time) (v1.Layer, error) {
	data, err := f.tar(mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression))
}
