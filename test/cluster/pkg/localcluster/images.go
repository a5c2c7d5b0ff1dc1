package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/imagebuild"
)

// A containerd cluster's images are imported into every node: nothing is
// pulled. The production images (imagebuild.Images: the agent, its sim
// variant, the webhook) are exactly what `make images` wrote, their
// linux/amd64 half (productionImages). The others are not production
// images and are assembled here from this machine's binaries by
// hack/build-cluster-bins.sh's oci-image (testImages): the workload probe,
// containerd's pause image and the earlier commit's agent of the downgrade
// test.
const (
	// PreviousImageTag is the tag, in the sim image's repository, of the
	// sim agent image of an earlier commit (Config.PreviousAgent), for
	// downgrades.
	PreviousImageTag = "previous"
	// ProbeImage is the workload image: it prints the devices, environment
	// and mounts its container got, then waits (test/cluster/cmd/probe).
	ProbeImage = "tessera.local/probe:dev"
	// PauseImage is containerd's sandbox image (test/cluster/cmd/pause).
	PauseImage = "tessera.local/pause:dev"
	// ImportPlatform is the platform of the images' index the nodes import.
	ImportPlatform = "linux/amd64"
)

// The production images by name (imagebuild.Images).
const (
	AgentImage    = "tessera-kubelet-plugin"
	AgentSimImage = "tessera-kubelet-plugin-sim"
	WebhookImage  = "tessera-webhook"
)

// image is one image archive to import; Platform, when set, the one
// platform of its index to import.
type image struct {
	Ref      string
	Archive  string
	Platform string
}

func (c *Config) imagesDir() string { return filepath.Join(c.Dir, "images") }

// clusterImages are the production images, then the test images.
func (c *Config) clusterImages() ([]image, error) {
	prod, err := c.ProductionImages()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.imagesDir(), 0o755); err != nil {
		return nil, err
	}
	var out []image
	for _, im := range imagebuild.Images() {
		// The layout as it is, in a tar archive (as `tar -C <layout> -cf - .`).
		archive := filepath.Join(c.imagesDir(), im.Name+".tar")
		if err := tarLayout(archive, prod[im.Name].Layout); err != nil {
			return nil, fmt.Errorf("image %s: %w", im.Name, err)
		}
		out = append(out, image{Ref: prod[im.Name].Ref, Archive: archive, Platform: ImportPlatform})
	}
	test, err := c.testImages(prod[AgentSimImage].Repository)
	if err != nil {
		return nil, err
	}
	return append(out, test...), nil
}

// testImages writes the archives of the probe, pause and, where
// Config.PreviousAgent holds one, the earlier agent's image (tagged
// PreviousImageTag in simRepository).
func (c *Config) testImages(simRepository string) ([]image, error) {
	var out []image
	for _, sp := range c.testImageSpecs(simRepository) {
		archive := filepath.Join(c.imagesDir(), sp.archive)
		cmd := exec.Command(c.bin("oci-image"), sp.args(archive)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build image %s: %w\n%s", sp.ref, err, b)
		}
		out = append(out, image{Ref: sp.ref, Archive: archive})
	}
	return out, nil
}

// imageSpec is one image for oci-image: its entrypoint and more files.
type imageSpec struct {
	ref, archive string
	entrypoint   string
	files        []string // HOST=IMAGE, the entrypoint's first
}

func (sp imageSpec) args(archive string) []string {
	args := []string{"--ref=" + sp.ref, "--out=" + archive, "--entrypoint=" + sp.entrypoint}
	for _, f := range sp.files {
		args = append(args, "--add="+f)
	}
	return args
}

func (c *Config) testImageSpecs(simRepository string) []imageSpec {
	var out []imageSpec
	if c.hasPreviousAgent() {
		// The earlier commit's agent, shaped as its sim image was then.
		plugin, sim := imagebuild.Agent.Path(), imagebuild.Sim.Path()
		out = append(out, imageSpec{simRepository + ":" + PreviousImageTag, "tessera-kubelet-plugin-sim-previous.tar", plugin,
			[]string{filepath.Join(c.PreviousAgent, imagebuild.Agent.Name) + "=" + plugin, filepath.Join(c.PreviousAgent, imagebuild.Sim.Name) + "=" + sim}})
	}
	return append(out,
		imageSpec{ProbeImage, "probe.tar", "/usr/bin/probe", []string{c.bin("probe") + "=/usr/bin/probe"}},
		imageSpec{PauseImage, "pause.tar", "/pause", []string{c.bin("pause") + "=/pause"}},
	)
}

// hasPreviousAgent: Config.PreviousAgent holds an agent, its stand-in and
// its chart.
func (c *Config) hasPreviousAgent() bool {
	if c.PreviousAgent == "" {
		return false
	}
	for _, f := range []string{"tessera-kubelet-plugin", "tessera-sim", "chart/Chart.yaml"} {
		if _, err := os.Stat(filepath.Join(c.PreviousAgent, f)); err != nil {
			return false
		}
	}
	return true
}

// ProductionImage is one image `make images` wrote to Config.Images.
type ProductionImage struct {
	Name       string // imagebuild's name, e.g. tessera-kubelet-plugin
	Ref        string // Repository:Tag, what containerd names it
	Repository string
	Tag        string
	Layout     string // its OCI image layout
}

// ProductionImages reads the layouts of every production image in
// Config.Images: each must hold ImportPlatform, and all one tag.
func (c *Config) ProductionImages() (map[string]ProductionImage, error) {
	out := map[string]ProductionImage{}
	tag := ""
	for _, im := range imagebuild.Images() {
		dir := filepath.Join(c.Images, im.Name)
		desc, plats, err := imagebuild.ReadLayout(dir)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w (make images builds it)", im.Name, err)
		}
		ref := desc.Annotations[imagebuild.ContainerdAnnotation]
		t := desc.Annotations[imagebuild.RefNameAnnotation]
		repo, ok := strings.CutSuffix(ref, ":"+t)
		if t == "" || !ok || !strings.HasSuffix(repo, "/"+im.Name) {
			return nil, fmt.Errorf("image %s: %s names it %q, tag %q: want <registry>/%s:<tag>", im.Name, dir, ref, t, im.Name)
		}
		if tag != "" && t != tag {
			return nil, fmt.Errorf("image %s is tagged %s, the others %s: run make images again", im.Name, t, tag)
		}
		tag = t
		if !hasPlatform(plats, ImportPlatform) {
			return nil, fmt.Errorf("image %s: %s has no %s image", im.Name, dir, ImportPlatform)
		}
		out[im.Name] = ProductionImage{Name: im.Name, Ref: ref, Repository: repo, Tag: t, Layout: dir}
	}
	return out, nil
}

func hasPlatform(plats []imagebuild.PlatformSize, p string) bool {
	for _, ps := range plats {
		if ps.Platform == p {
			return true
		}
	}
	return false
}

// ChartPackage is `make release-chart VERSION=<tag>`'s package in
// Config.Release for the production images' tag: the chart a containerd
// cluster installs (its appVersion is that tag).
func (c *Config) ChartPackage() (string, error) {
	prod, err := c.ProductionImages()
	if err != nil {
		return "", err
	}
	tag := prod[AgentImage].Tag
	pkg := filepath.Join(c.Release, "tessera-"+strings.TrimPrefix(tag, "v")+".tgz")
	if _, err := os.Stat(pkg); err != nil {
		return "", fmt.Errorf("the chart package of the images' version: %w (make release-chart VERSION=%s builds it)", err, tag)
	}
	return pkg, nil
}
