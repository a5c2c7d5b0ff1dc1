package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/imagebuild"
)

// writeLayouts writes an OCI layout per production image (imagebuild's
// names) as make images does (imagebuild.WriteLayout), of one random
// image for platform, tagged tag unless tags names another.
func writeLayouts(t *testing.T, dir, platform, tag string, tags map[string]string) {
	t.Helper()
	goos, arch, _ := strings.Cut(platform, "/")
	for _, im := range imagebuild.Images() {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
			mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: arch}}})
		tg := tag
		if other, ok := tags[im.Name]; ok {
			tg = other
		}
		if err := imagebuild.WriteLayout(filepath.Join(dir, im.Name), idx, tg, "registry.example/tessera/"+im.Name+":"+tg); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProductionImages: the cluster takes every image of imagebuild.Images
// from make images' layouts, by the name and tag they carry, and the chart
// package of that tag.
func TestProductionImages(t *testing.T) {
	root := t.TempDir()
	c := &Config{Images: filepath.Join(root, "images"), Release: filepath.Join(root, "release")}
	writeLayouts(t, c.Images, ImportPlatform, "v1.2.3", nil)
	prod, err := c.ProductionImages()
	if err != nil {
		t.Fatal(err)
	}
	if len(prod) != len(imagebuild.Images()) {
		t.Errorf("%d images, imagebuild has %d", len(prod), len(imagebuild.Images()))
	}
	for _, im := range imagebuild.Images() {
		p := prod[im.Name]
		if p.Ref != "registry.example/tessera/"+im.Name+":v1.2.3" || p.Repository != "registry.example/tessera/"+im.Name || p.Tag != "v1.2.3" {
			t.Errorf("%s: %+v", im.Name, p)
		}
	}
	if _, err := c.ChartPackage(); err == nil || !strings.Contains(err.Error(), "make release-chart VERSION=v1.2.3") {
		t.Errorf("no package: ChartPackage says %v, want it to name make release-chart VERSION=v1.2.3", err)
	}
	if err := os.MkdirAll(c.Release, 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(c.Release, "tessera-1.2.3.tgz")
	if err := os.WriteFile(want, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ChartPackage(); err != nil || got != want {
		t.Errorf("ChartPackage = %q, %v; want %q", got, err, want)
	}
}

// TestProductionImagesRefused: layouts of two versions, without the
// nodes' platform, or missing, are refused, with what to run.
func TestProductionImagesRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		platform string
		tags     map[string]string
		want     string
	}{
		"two versions": {ImportPlatform, map[string]string{imagebuild.Images()[1].Name: "v9.9.9"}, "run make images again"},
		"arm64 only":   {"linux/arm64", nil, "has no " + ImportPlatform},
	} {
		t.Run(name, func(t *testing.T) {
			c := &Config{Images: t.TempDir()}
			writeLayouts(t, c.Images, tc.platform, "v1.2.3", tc.tags)
			if _, err := c.ProductionImages(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ProductionImages: %v, want %q", err, tc.want)
			}
		})
	}
	c := &Config{Images: t.TempDir()}
	if _, err := c.ProductionImages(); err == nil || !strings.Contains(err.Error(), "make images builds it") {
		t.Errorf("no layouts: %v", err)
	}
}

// TestTestImagesAreNotProductionImages: what oci-image assembles here is
// the probe, pause and the earlier agent only, never an image of
// imagebuild.Images under its own name and tag; the earlier agent's image
// holds that agent and its stand-in where the sim image has them.
func TestTestImagesAreNotProductionImages(t *testing.T) {
	prev := t.TempDir()
	for _, f := range []string{"tessera-kubelet-plugin", "tessera-sim", "chart/Chart.yaml"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(prev, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(prev, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &Config{BinDir: "/bin", PreviousAgent: prev}
	sim, _ := imagebuild.Lookup(AgentSimImage)
	var refs []string
	for _, sp := range c.testImageSpecs("registry.example/tessera/" + AgentSimImage) {
		refs = append(refs, sp.ref)
		if sp.ref == "registry.example/tessera/"+AgentSimImage+":"+PreviousImageTag {
			var files []string
			for _, f := range sp.files {
				_, in, _ := strings.Cut(f, "=")
				files = append(files, in)
			}
			for _, want := range []string{imagebuild.Agent.Path(), imagebuild.Sim.Path()} {
				if !strings.Contains(strings.Join(sim.Files(), " "), want) || !strings.Contains(strings.Join(files, " "), want) {
					t.Errorf("previous image holds %q; the sim image %q; want both to hold %s", files, sim.Files(), want)
				}
			}
			continue
		}
		for _, im := range imagebuild.Images() {
			if strings.Contains(sp.ref, im.Name) {
				t.Errorf("test image %s assembles production image %s", sp.ref, im.Name)
			}
		}
	}
	if got := strings.Join(refs, " "); got != "registry.example/tessera/"+AgentSimImage+":"+PreviousImageTag+" "+ProbeImage+" "+PauseImage {
		t.Errorf("test images %s", got)
	}
}
