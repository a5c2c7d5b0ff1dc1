package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
)

// AgentNamespace is where a containerd cluster's agents run.
const AgentNamespace = "tessera"

// AgentRelease is the Helm release of a node's agent. One release per node:
// the nodes share this machine, so each needs its own host paths (kubelet
// root, CDI directory, simulator state), which one DaemonSet cannot give;
// each release's DaemonSet selects its one node.
func AgentRelease(node string) string { return "tessera-" + node }

// agentValues are the chart values of a node's release: the sim backend
// with the node's machine and modes, the node's host paths, the images'
// repositories as a user who mirrors make images' output sets them (their
// tags are the chart's appVersion, the images' version: a test checks the
// pods run exactly the imported images). Host network: the API server is on this
// machine's loopback and there is no kube-proxy for the kubernetes
// Service, so the agent is pointed at it directly. DeviceClasses come from
// internal/deviceclasses (applied once at Up). The first node's release
// also runs the webhook (cluster-wide: one is enough), as the chart's
// Deployment and Service; the API server calls its pods directly.
func (c *Config) agentValues(s *State, n Node, webhook bool, prod map[string]ProductionImage) map[string]any {
	v := map[string]any{
		"image":   map[string]any{"repository": prod[AgentImage].Repository},
		"backend": "sim",
		"sim": map[string]any{
			"profile":  n.Profile,
			"stateDir": c.SimStateDir(n.Name),
			"image":    map[string]any{"repository": prod[AgentSimImage].Repository},
			// The MPS stand-in from the host's driver root (makeDriverRoot),
			// not the image's, as nvidia-cuda-mps-control comes from the
			// node's driver.
			"driverRoot": c.DriverRoot(n.Name),
		},
		"partitioning": n.PartitioningOf(),
		"sharing":      n.SharingOf(),
		"kubeletDir":   c.KubeletRoot(n.Name),
		"attribution":  map[string]any{"poll": AttributionPoll},
		"telemetry":    map[string]any{"poll": TelemetryPoll},
		"cdi":          map[string]any{"dir": c.CDIDir(n.Name), "vendorDirs": []string{c.CDIDir(n.Name)}},
		// The memory limit hook, installed per node like the node's other
		// host paths (the runtime runs it from there); a containerd node's
		// runc runs it against the simulator's cgroup tree.
		"memoryLimits": map[string]any{"enabled": c.Runtime == RuntimeContainerd, "hookDir": filepath.Join(c.NodeDir(n.Name), "bin")},
		// No securityContext value: the agent runs with what the chart
		// renders for backend sim.
		"hostNetwork": true,
		// Upgrades hand over from agent to agent (docs/operating.md): every
		// agent here is of this version from the start.
		"surgeUpgrades": true,
		"metrics":       map[string]any{"port": s.Ports[metricsPort(n.Name)]},
		"nodeSelector":  map[string]string{"kubernetes.io/hostname": n.Name},
		"logging":       map[string]any{"verbosity": 4},
		"extraEnv": []map[string]string{
			{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
			{"name": "KUBERNETES_SERVICE_PORT", "value": strconv.Itoa(s.Ports["apiserver"])},
		},
		"webhook": map[string]any{
			"enabled": webhook,
			"image":   map[string]any{"repository": prod[WebhookImage].Repository},
		},
		"deviceClasses": map[string]any{
			"gpu": false, "nvidia": false, "amd": false, "mig": false, "xcp": false, "imex": false, "vfio": false,
		},
	}
	if n.Passthrough {
		v["passthrough"] = map[string]any{"enabled": true}
	}
	if imex := c.imexValues(n.Name); imex != nil {
		v["imex"] = imex
	}
	return v
}

// SimStateDir is a node's simulator state (its agent's --sim-state-dir).
func (c *Config) SimStateDir(node string) string { return filepath.Join(c.NodeDir(node), "sim") }

// installAgents installs the chart package (ChartPackage) once per node.
func (c *Config) installAgents(s *State) error {
	ch, err := c.packagedChart()
	if err != nil {
		return err
	}
	prod, err := c.ProductionImages()
	if err != nil {
		return err
	}
	for i, n := range c.Nodes {
		values := filepath.Join(c.NodeDir(n.Name), "agent-values.json")
		data, err := json.MarshalIndent(c.agentValues(s, n, i == 0, prod), "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(values, data, 0o644); err != nil {
			return err
		}
		if err := ch.Install(c.Kubeconfig(), AgentRelease(n.Name), AgentNamespace, values); err != nil {
			return fmt.Errorf("node %s: install the chart: %w", n.Name, err)
		}
	}
	return nil
}

// UpgradeAgent runs `helm upgrade` on node's agent release with its values
// kept and sets changed (e.g. "logging.verbosity=5"): the DaemonSet then
// replaces the agent's pod, as an operator's upgrade does.
func (c *Config) UpgradeAgent(node string, sets ...string) error {
	ch, err := c.packagedChart()
	if err != nil {
		return err
	}
	if err := ch.Upgrade(c.Kubeconfig(), AgentRelease(node), AgentNamespace, sets...); err != nil {
		return fmt.Errorf("node %s: upgrade the chart: %w", node, err)
	}
	return nil
}

// DowngradeAgent runs `helm upgrade` on node's agent release to the earlier
// commit's chart and agent (Config.PreviousAgent, image tag
// PreviousImageTag), its values kept and sets changed, as an operator's
// rollback to the version before does. UpgradeAgent with image.tag and
// sim.image.tag the production images' tag goes back.
func (c *Config) DowngradeAgent(node string, sets ...string) error {
	if !c.hasPreviousAgent() {
		return fmt.Errorf("node %s: no earlier agent in %s (hack/build-previous-agent.sh builds it)", node, c.PreviousAgent)
	}
	ch, err := c.chart()
	if err != nil {
		return err
	}
	ch.Dir = filepath.Join(c.PreviousAgent, "chart")
	sets = append([]string{"image.tag=" + PreviousImageTag, "sim.image.tag=" + PreviousImageTag}, sets...)
	if err := ch.Upgrade(c.Kubeconfig(), AgentRelease(node), AgentNamespace, sets...); err != nil {
		return fmt.Errorf("node %s: downgrade the chart: %w", node, err)
	}
	return nil
}

// packagedChart is helm with the chart package the agents are installed
// from (ChartPackage).
func (c *Config) packagedChart() (*helmchart.Chart, error) {
	ch, err := c.chart()
	if err != nil {
		return nil, err
	}
	if ch.Dir, err = c.ChartPackage(); err != nil {
		return nil, err
	}
	return ch, nil
}
