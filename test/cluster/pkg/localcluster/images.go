package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The images of a containerd cluster, built from this machine's binaries
// (hack/build-cluster-bins.sh's oci-image) and imported into every node:
// nothing is pulled.
const (
	// ImageTag is the tag of the images of this repository's programs.
	ImageTag = "dev"
	// AgentImageRepository: tessera-kubelet-plugin, the chart's DaemonSet
	// image (pull policy Never).
	AgentImageRepository = "tessera.local/tessera-kubelet-plugin"
	// WebhookImageRepository: tessera-webhook, the chart's Deployment.
	WebhookImageRepository = "tessera.local/tessera-webhook"
	// ProbeImage is the workload image: it prints the devices, environment
	// and mounts its container got, then waits (test/cluster/cmd/probe).
	ProbeImage = "tessera.local/probe:dev"
	// PauseImage is containerd's sandbox image (test/cluster/cmd/pause).
	PauseImage = "tessera.local/pause:dev"
)

// image is one image archive to import.
type image struct {
	Ref     string
	Archive string
}

func (c *Config) imagesDir() string { return filepath.Join(c.Dir, "images") }

// buildImages writes the archives of the agent, webhook, probe and pause
// images.
func (c *Config) buildImages() ([]image, error) {
	if err := os.MkdirAll(c.imagesDir(), 0o755); err != nil {
		return nil, err
	}
	specs := []struct {
		ref, bin, path string
		extra          []string // more HOST=IMAGE files
	}{
		// The sim backend runs its MPS stand-in, tessera-sim, from the
		// agent binary's directory (as deployments/Dockerfile installs it).
		{AgentImageRepository + ":" + ImageTag, c.PluginBin, "/usr/bin/tessera-kubelet-plugin",
			[]string{filepath.Join(filepath.Dir(c.PluginBin), "tessera-sim") + "=/usr/bin/tessera-sim"}},
		{WebhookImageRepository + ":" + ImageTag, c.WebhookBin, "/usr/bin/tessera-webhook", nil},
		{ProbeImage, c.bin("probe"), "/usr/bin/probe", nil},
		{PauseImage, c.bin("pause"), "/pause", nil},
	}
	var out []image
	for _, sp := range specs {
		archive := filepath.Join(c.imagesDir(), filepath.Base(sp.path)+".tar")
		args := []string{"--ref=" + sp.ref, "--out=" + archive, "--add=" + sp.bin + "=" + sp.path, "--entrypoint=" + sp.path}
		for _, e := range sp.extra {
			args = append(args, "--add="+e)
		}
		cmd := exec.Command(c.bin("oci-image"), args...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build image %s: %w\n%s", sp.ref, err, b)
		}
		out = append(out, image{Ref: sp.ref, Archive: archive})
	}
	return out, nil
}
