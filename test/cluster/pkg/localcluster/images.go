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
	// AgentImageRepository: tessera-kubelet-plugin alone, shaped as the
	// production image (deployments/Dockerfile's default target).
	AgentImageRepository = "tessera.local/tessera-kubelet-plugin"
	// AgentSimImageRepository: tessera-kubelet-plugin with tessera-sim, the
	// sim backend's MPS stand-in, beside it in /usr/bin (as the Dockerfile's
	// tessera-kubelet-plugin-sim target): the chart's DaemonSet image for
	// the sim backend (pull policy Never).
	AgentSimImageRepository = "tessera.local/tessera-kubelet-plugin-sim"
	// WebhookImageRepository: tessera-webhook, the chart's Deployment.
	WebhookImageRepository = "tessera.local/tessera-webhook"
	// PreviousImageTag is the tag of the sim agent image of an earlier
	// commit (Config.PreviousAgent), for downgrades.
	PreviousImageTag = "previous"
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

// buildImages writes the archives of the agent (production and sim),
// webhook, probe and pause images.
func (c *Config) buildImages() ([]image, error) {
	if err := os.MkdirAll(c.imagesDir(), 0o755); err != nil {
		return nil, err
	}
	var out []image
	for _, sp := range c.imageSpecs() {
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

func (c *Config) imageSpecs() []imageSpec {
	const plugin, sim, hook = "/usr/bin/tessera-kubelet-plugin", "/usr/bin/tessera-sim", "/usr/bin/tessera-cdi-hook"
	agent := c.PluginBin + "=" + plugin
	// The chart's init container installs the memory limit hook from the
	// agent's image.
	limitHook := filepath.Join(filepath.Dir(c.PluginBin), "tessera-cdi-hook") + "=" + hook
	var previous []imageSpec
	if c.hasPreviousAgent() {
		previous = append(previous, imageSpec{AgentSimImageRepository + ":" + PreviousImageTag, "tessera-kubelet-plugin-sim-previous.tar", plugin,
			[]string{filepath.Join(c.PreviousAgent, "tessera-kubelet-plugin") + "=" + plugin, filepath.Join(c.PreviousAgent, "tessera-sim") + "=" + sim}})
	}
	return append(previous, []imageSpec{
		{AgentImageRepository + ":" + ImageTag, "tessera-kubelet-plugin.tar", plugin, []string{agent, limitHook}},
		// The sim backend runs its MPS stand-in from the agent binary's
		// directory.
		{AgentSimImageRepository + ":" + ImageTag, "tessera-kubelet-plugin-sim.tar", plugin,
			[]string{agent, filepath.Join(filepath.Dir(c.PluginBin), "tessera-sim") + "=" + sim, limitHook}},
		{WebhookImageRepository + ":" + ImageTag, "tessera-webhook.tar", "/usr/bin/tessera-webhook", []string{c.WebhookBin + "=/usr/bin/tessera-webhook"}},
		{ProbeImage, "probe.tar", "/usr/bin/probe", []string{c.bin("probe") + "=/usr/bin/probe"}},
		{PauseImage, "pause.tar", "/pause", []string{c.bin("pause") + "=/pause"}},
	}...)
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
