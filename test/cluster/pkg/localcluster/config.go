package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Node is one simulated GPU node: a kubelet whose tessera-kubelet-plugin
// runs the sim backend with Profile and --partitioning=Partitioning.
type Node struct {
	Name    string `json:"name"`
	Profile string `json:"profile"`
	// Partitioning is static or dynamic; empty is the agent's default
	// (static). The kubelet labels the node tessera.dev/partitioning.
	Partitioning string `json:"partitioning,omitempty"`
	// Sharing is none or capacity (the agent's --sharing); empty is none.
	// The kubelet labels the node tessera.dev/sharing.
	Sharing string `json:"sharing,omitempty"`
	// Passthrough has the node's agent pass GPUs of the vfio class
	// through to virtual machines (--passthrough, the chart's
	// passthrough.enabled; docs/vfio.md), through the simulator's sysfs.
	Passthrough bool `json:"passthrough,omitempty"`
}

// DefaultNodes are the nodes `make cluster-up` starts unless told otherwise.
var DefaultNodes = []Node{
	{Name: "gpu-h100", Profile: "dgx-h100", Passthrough: true},
	{Name: "gpu-mi300x", Profile: "mi300x-8", Passthrough: true},
	{Name: "gpu-mixed", Profile: "mixed-inference"},
	{Name: "gpu-h100-dynamic", Profile: "dgx-h100", Partitioning: "dynamic", Passthrough: true},
	{Name: "gpu-l4-shared", Profile: "l4-4", Sharing: "capacity"},
}

// ParseNodes reads "name=profile[:partitioning[:sharing]],...", e.g.
// "gpu-h100=dgx-h100,gpu-dyn=dgx-h100:dynamic,gpu-l4=l4-4:static:capacity".
func ParseNodes(s string) ([]Node, error) {
	var out []Node
	for _, part := range strings.Split(s, ",") {
		name, profile, ok := strings.Cut(strings.TrimSpace(part), "=")
		profile, modes, _ := strings.Cut(profile, ":")
		partitioning, sharing, _ := strings.Cut(modes, ":")
		if !ok || name == "" || profile == "" {
			return nil, fmt.Errorf("node %q: want name=profile, name=profile:dynamic or name=profile:static:capacity", part)
		}
		switch partitioning {
		case "", "static", "dynamic":
		default:
			return nil, fmt.Errorf("node %q: partitioning %q is not static or dynamic", part, partitioning)
		}
		switch sharing {
		case "", "none", "capacity":
		default:
			return nil, fmt.Errorf("node %q: sharing %q is not none or capacity", part, sharing)
		}
		out = append(out, Node{Name: name, Profile: profile, Partitioning: partitioning, Sharing: sharing})
	}
	return out, nil
}

// SharingOf is the node's sharing mode, none when unset.
func (n Node) SharingOf() string {
	if n.Sharing == "" {
		return "none"
	}
	return n.Sharing
}

// PartitioningOf is the node's partitioning mode, static when unset.
func (n Node) PartitioningOf() string {
	if n.Partitioning == "" {
		return "static"
	}
	return n.Partitioning
}

// Config says where things are.
type Config struct {
	// Dir holds all cluster state but the nodes' socket dirs (RunDir);
	// Down removes nothing outside these.
	Dir string
	// BinDir holds etcd, kube-*, kubelet, kubectl and fake-runtime.
	BinDir string
	// PluginBin is the tessera-kubelet-plugin binary.
	PluginBin string
	// WebhookBin is the tessera-webhook binary.
	WebhookBin string
	// Chart is the Helm chart directory; its webhook configuration is the
	// one registered (helm is BinDir's).
	Chart string
	// DeviceClasses is the YAML file of DeviceClasses to apply.
	DeviceClasses string
	Nodes         []Node
	// SchedulerArgs are extra kube-scheduler flags (benchmarks).
	SchedulerArgs []string
	// APIServerArgs are extra kube-apiserver flags (feature gates).
	APIServerArgs []string
	// Workloads turns on the Workload API and gang scheduling
	// (WorkloadGates, served at WorkloadAPI) in every component that
	// acts on them: off by default in Kubernetes 1.37, on in the e2e
	// suite and the demo (docs/training.md, "Gangs").
	Workloads bool
	// IMEXChannels, above 0, has the agent of each node in a multi-node
	// NVLink domain offer that many channels of the domain, and runs its
	// IMEX daemon stand-in: a host service of each fake node, the agent's
	// pod on a containerd node (imex.go).
	IMEXChannels int
	// Runtime is the nodes' container runtime: RuntimeFake (the default) or
	// RuntimeContainerd.
	Runtime string
	// Images holds `make images`' OCI layouts, <Images>/<image>/: a
	// containerd cluster imports their linux/amd64 half (ProductionImages).
	Images string
	// Release holds `make release-chart`'s package of the images' version,
	// tessera-<version>.tgz: the chart a containerd cluster installs
	// (ChartPackage).
	Release string
	// PreviousAgent is hack/build-previous-agent.sh's output: an earlier
	// commit's agent, stand-in and chart. Where it holds them, a
	// containerd cluster imports that agent as PreviousImageTag, for
	// DowngradeAgent.
	PreviousAgent string
}

// The container runtimes of the local cluster's nodes.
const (
	// RuntimeFake: a fake CRI runtime per node that records what each
	// container would get; the node agents run as host processes. Fast:
	// nothing is unpacked or started.
	RuntimeFake = "fake"
	// RuntimeContainerd: containerd with runc and CNI per node; the node
	// agents run as the chart's DaemonSet, containers run for real.
	RuntimeContainerd = "containerd"
)

// RuntimeOf is the configured runtime, RuntimeFake when unset.
func (c *Config) RuntimeOf() string {
	if c.Runtime == "" {
		return RuntimeFake
	}
	return c.Runtime
}

// ForRepo is the configuration `make cluster-up` and `make demo` use: state
// in <repo>/_output/cluster, binaries from `make build` and
// hack/build-cluster-bins.sh, the shipped DeviceClasses and chart, the
// default nodes.
func ForRepo(repo string) *Config {
	return &Config{
		Dir:           filepath.Join(repo, "_output/cluster"),
		BinDir:        filepath.Join(repo, "_output/cluster-bin"),
		PluginBin:     filepath.Join(repo, "bin/tessera-kubelet-plugin"),
		WebhookBin:    filepath.Join(repo, "bin/tessera-webhook"),
		Chart:         filepath.Join(repo, "deployments/helm/tessera"),
		DeviceClasses: filepath.Join(repo, "internal/deviceclasses/deviceclasses.yaml"),
		PreviousAgent: filepath.Join(repo, "_output/previous-agent"),
		Images:        filepath.Join(repo, "_output/images"),
		Release:       filepath.Join(repo, "_output/release"),
		Nodes:         DefaultNodes,
	}
}

// Kubeconfig is the admin kubeconfig Up writes.
func (c *Config) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

// LogDir holds every component's log.
func (c *Config) LogDir() string { return filepath.Join(c.Dir, "logs") }

// NodeDir is one node's directory.
func (c *Config) NodeDir(node string) string { return filepath.Join(c.Dir, "nodes", node) }

// CDIDir is where a node's plugin writes CDI specs and its runtime reads them.
func (c *Config) CDIDir(node string) string { return filepath.Join(c.NodeDir(node), "cdi") }

// RecordDir is where a node's fake runtime records containers.
func (c *Config) RecordDir(node string) string { return filepath.Join(c.NodeDir(node), "records") }

// KubeletRoot is a node's kubelet --root-dir (in its short RunDir).
func (c *Config) KubeletRoot(node string) string { return filepath.Join(c.RunDir(node), "kubelet") }

// PodResourcesSocket is a node's kubelet PodResources socket, which its
// agent polls (--pod-resources-socket).
func (c *Config) PodResourcesSocket(node string) string {
	return filepath.Join(c.KubeletRoot(node), "pod-resources", "kubelet.sock")
}

// AttributionPoll is every node's --attribution-poll: short, so tests
// see a pod's tessera_device_allocation_info within seconds.
const AttributionPoll = "2s"

// TelemetryPoll is every node's --telemetry-poll: short, so a test sees
// `tessera-sim load` on the metrics within seconds.
const TelemetryPoll = "1s"

// PluginDataDir is the node plugin's socket and checkpoint directory.
func (c *Config) PluginDataDir(node string) string {
	return filepath.Join(c.KubeletRoot(node), "plugins", "gpu.tessera.dev")
}

// CheckpointPath is the node plugin's checkpoint.
func (c *Config) CheckpointPath(node string) string {
	return filepath.Join(c.PluginDataDir(node), "checkpoint.json")
}

// State is what Up started, persisted so Down (and tests) can find it.
type State struct {
	Ports   map[string]int    `json:"ports"`
	Procs   []Proc            `json:"procs"`
	Sysctls map[string]string `json:"sysctls,omitempty"`
	Nodes   []Node            `json:"nodes"`
	// Runtime is the nodes' container runtime (Config.Runtime).
	Runtime string `json:"runtime,omitempty"`
}

// Proc is one started process.
type Proc struct {
	Name string   `json:"name"`
	Pid  int      `json:"pid"`
	Args []string `json:"args"`
	Log  string   `json:"log"`
}

func (c *Config) statePath() string { return filepath.Join(c.Dir, "state.json") }

// LoadState reads the state file; a missing file is an empty state.
func (c *Config) LoadState() (*State, error) {
	data, err := os.ReadFile(c.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return &State{Ports: map[string]int{}}, nil
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("cluster state %s: %w", c.statePath(), err)
	}
	if s.Ports == nil {
		s.Ports = map[string]int{}
	}
	return &s, nil
}

func (c *Config) saveState(s *State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := c.statePath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.statePath())
}
