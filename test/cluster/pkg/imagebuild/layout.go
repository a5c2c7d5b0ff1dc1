package imagebuild

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of the index's descriptor in index.json: the tag (OCI's
// ref.name) and the full reference containerd's `ctr images import` names
// the image by.
const (
	RefNameAnnotation    = "org.opencontainers.image.ref.name"
	ContainerdAnnotation = "io.containerd.image.name"
)

// WriteLayout replaces dir with an OCI image layout whose index.json holds
// one descriptor, idx's, annotated with tag and ref (registry/name:tag):
// `crane push dir ref` pushes idx, `ctr images import` of its tarball
// names it ref.
func WriteLayout(dir string, idx v1.ImageIndex, tag, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefNameAnnotation: tag, ContainerdAnnotation: ref})); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	return os.Rename(tmp, dir)
}

// PlatformSize is one platform's image in a layout: its manifest's digest
// and the bytes of its compressed layers (what a node pulls).
type PlatformSize struct {
	Platform    string
	Digest      string
	LayerBytes  int64
	LayerDigest []string
	Version     string // its org.opencontainers.image.version label
}

// ReadLayout reads back what WriteLayout wrote: the one index, its
// descriptor's annotations and each platform's size.
func ReadLayout(dir string) (v1.Descriptor, []PlatformSize, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		return v1.Descriptor{}, nil, fmt.Errorf("%s: index.json holds %d descriptors, want one OCI image index", dir, len(tm.Manifests))
	}
	desc := tm.Manifests[0]
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	var sizes []PlatformSize
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		mf, err := img.Manifest()
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		ps := PlatformSize{Digest: m.Digest.String()}
		if m.Platform != nil {
			ps.Platform = m.Platform.OS + "/" + m.Platform.Architecture
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		ps.Version = cf.Config.Labels["org.opencontainers.image.version"]
		for _, l := range mf.Layers {
			ps.LayerBytes += l.Size
			ps.LayerDigest = append(ps.LayerDigest, l.Digest.String())
		}
		sizes = append(sizes, ps)
	}
	return desc, sizes, nil
}
