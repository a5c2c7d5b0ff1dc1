package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestReleasePath is the release's image path in small, cheap enough for
// make test: a static binary (the test cluster's pause) cross-built for
// arm64 beside amd64, assembled by Image.Build, written by WriteLayout and
// read back with layout.FromPath: one index of both platforms, OCI media
// types everywhere, the entrypoint, user, labels and history, the binary
// at its path with fixed owner, mode and time and of the right machine,
// and the same digests when built again.
func TestReleasePath(t *testing.T) {
	pause := Binary{Name: "pause", Package: "./cluster/cmd/pause"}
	im := Image{Name: "pause", Description: "test", Base: Static, Layers: []Layer{{Binaries: []Binary{pause}}},
		Entrypoint: []string{pause.Path()}, User: Nonroot}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	o := Options{ModuleDir: "../../..", WorkDir: t.TempDir(), Version: "v0.0.0-test", Commit: "0123abcd", Created: created, Source: "https://example.com/tessera"}
	if err := BuildBinaries(context.Background(), o, Platforms, im.Binaries()); err != nil {
		t.Fatal(err)
	}
	idx, err := im.Build(o, Platforms)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pause")
	if err := WriteLayout(dir, idx, "v0.0.0-test", "example.com/pause:v0.0.0-test"); err != nil {
		t.Fatal(err)
	}

	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex ||
		tm.Manifests[0].Annotations[RefNameAnnotation] != "v0.0.0-test" || tm.Manifests[0].Annotations[ContainerdAnnotation] != "example.com/pause:v0.0.0-test" {
		t.Fatalf("index.json: %+v", tm.Manifests)
	}
	got, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if gm.MediaType != types.OCIImageIndex || gm.Annotations["org.opencontainers.image.version"] != "v0.0.0-test" {
		t.Errorf("index: media type %s, annotations %v", gm.MediaType, gm.Annotations)
	}
	var plats []string
	for _, m := range gm.Manifests {
		plats = append(plats, m.Platform.OS+"/"+m.Platform.Architecture)
		img, err := got.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, m.Platform.Architecture, img, im, created)
	}
	if !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %q", plats)
	}

	if msgs := CheckLayout(dir, "v0.0.0-test", Platforms); len(msgs) != 0 {
		t.Errorf("CheckLayout of the layout as written: %q", msgs)
	}
	if msgs := CheckLayout(dir, "v9.9.9", Platforms); len(msgs) != 3 {
		t.Errorf("CheckLayout for another version: %q, want the tag and both images' labels refused", msgs)
	}
	if msgs := CheckLayout(dir, "v0.0.0-test", Platforms[:1]); len(msgs) != 1 {
		t.Errorf("CheckLayout for amd64 alone: %q, want the platforms refused", msgs)
	}
	blob := filepath.Join(dir, "blobs", "sha256", mf0(t, got).Layers[0].Digest.Hex)
	if err := os.WriteFile(blob, []byte("not the layer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if msgs := CheckLayout(dir, "v0.0.0-test", Platforms); len(msgs) != 1 || !strings.Contains(msgs[0], "holds content of") {
		t.Errorf("CheckLayout of a changed blob: %q", msgs)
	}

	again, err := im.Build(o, Platforms)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 || d1 != tm.Manifests[0].Digest {
		t.Errorf("digests differ: built %s, again %s, on disk %s", d1, d2, tm.Manifests[0].Digest)
	}
}

// mf0 is the manifest of idx's first image.
func mf0(t *testing.T, idx v1.ImageIndex) *v1.Manifest {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return mf
}

func checkImage(t *testing.T, arch string, img v1.Image, im Image, created time.Time) {
	t.Helper()
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.MediaType != types.OCIManifestSchema1 || mf.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("%s: manifest %s, config %s", arch, mf.MediaType, mf.Config.MediaType)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != arch || cf.OS != "linux" || !slices.Equal(cf.Config.Entrypoint, im.Entrypoint) || cf.Config.User != Nonroot ||
		cf.Config.Labels["org.opencontainers.image.revision"] != "0123abcd" || !cf.Created.Time.Equal(created) {
		t.Errorf("%s: config %+v", arch, cf)
	}
	if len(cf.History) != 2 || len(mf.Layers) != 2 {
		t.Errorf("%s: %d history entries, %d layers; want the base's and the program's", arch, len(cf.History), len(mf.Layers))
	}
	for _, l := range mf.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("%s: layer media type %s", arch, l.MediaType)
		}
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("%s: %s owned %d:%d, time %s", arch, h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name != "usr/bin/pause" {
			continue
		}
		found = true
		if h.Mode != 0o755 {
			t.Errorf("%s: usr/bin/pause mode %o", arch, h.Mode)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
		if f.Machine != want {
			t.Errorf("%s: usr/bin/pause is for %s", arch, f.Machine)
		}
	}
	if !found {
		t.Errorf("%s: no usr/bin/pause in the program's layer", arch)
	}
}
