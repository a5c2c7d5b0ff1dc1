package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/internal/inspect/top"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// finaleFile is the scenario the demo keeps running while it shows the
// fleet at work: kubectl tessera top and inventory.
const finaleFile = "15-gpus-at-work.yaml"

// finaleLoad is what runs on each pod's device (tessera-sim load), so that
// top has numbers to show. The two L4 pods share one GPU: one load is that
// GPU's.
var finaleLoad = map[string]struct{ util, memory string }{
	"trainer":    {"85", "60Gi"},
	"notebook":   {"40", "6Gi"},
	"chat":       {"55", "11Gi"},
	"mi300x-job": {"70", "150Gi"},
}

// plugin runs bin/kubectl-tessera against the local cluster.
type plugin struct {
	root string
	c    *localcluster.Config
}

func (p plugin) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(p.root, "bin/kubectl-tessera"), append(args, "--kubeconfig="+p.c.Kubeconfig())...)
}

// show prints `kubectl tessera ARGS` and its output; hidden are flags
// the local cluster needs that a user's cluster would not (--metrics-url).
func (p plugin) show(ctx context.Context, args []string, hidden ...string) error {
	fmt.Printf("\n== kubectl tessera %s\n", strings.Join(args, " "))
	cmd := p.command(ctx, append(args, hidden...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// metricsURLs are top's --metrics-url flags: the local cluster's agents
// are host processes, not pods the API server could proxy to. They serve
// /metrics over HTTPS to an authorized token: the flags name the CA of
// their certificates and the cluster's metrics reader's token, which the
// admin kubeconfig (a client certificate) does not hold.
func (p plugin) metricsURLs() ([]string, error) {
	s, err := p.c.LoadState()
	if err != nil {
		return nil, err
	}
	args := p.c.MetricsFlags()
	for _, n := range p.c.Nodes {
		args = append(args, "--metrics-url", n.Name+"="+localcluster.MetricsURL(s, n.Name))
	}
	return args, nil
}

// finale loads the running pods' devices, waits for the agents' next
// telemetry poll to show them, and prints top pods, top nodes and the
// inventory while the pods still run.
func finale(ctx context.Context, p plugin, placements []*scenario.Placement) error {
	var loaded [][]string // tessera-sim load args of each device loaded
	defer func() {
		// The pods are deleted next: their devices go idle with them.
		for _, a := range loaded {
			_ = exec.Command(filepath.Join(p.root, "bin/tessera-sim"), append(a, "--clear")...).Run()
		}
	}()
	for _, pl := range placements {
		l, ok := finaleLoad[pl.Pod]
		if !ok {
			continue
		}
		for _, cl := range pl.Claims {
			for _, d := range cl.Devices {
				dev := []string{"load", "--state-dir=" + p.c.SimStateDir(pl.Node), "--device=" + d.Device}
				cmd := exec.CommandContext(ctx, filepath.Join(p.root, "bin/tessera-sim"), append(dev, "--util="+l.util, "--memory="+l.memory)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("tessera-sim load for %s: %v: %s", pl.Pod, err, out)
				}
				loaded = append(loaded, dev)
				fmt.Printf("  tessera-sim load: %s's %s on %s runs at %s%% with %s\n", pl.Pod, d.Device, pl.Node, l.util, l.memory)
			}
		}
	}
	urls, err := p.metricsURLs()
	if err != nil {
		return err
	}
	// The agents poll telemetry every localcluster.TelemetryPoll: wait
	// until top shows the trainer's load.
	args := append([]string{"top", "pods", "-n", namespace}, urls...)
	err = scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		out, err := p.command(ctx, append(args, "-o", "json")...).Output()
		if err != nil {
			return false, err.Error()
		}
		var pods []top.Pod
		if err := json.Unmarshal(out, &pods); err != nil {
			return false, err.Error()
		}
		for _, pod := range pods {
			if pod.Pod == "trainer" && pod.Utilization != nil && *pod.Utilization > 0 {
				return true, ""
			}
		}
		return false, "the trainer's load is not in its agent's metrics yet"
	})
	if err != nil {
		return err
	}
	fmt.Println("\n  (top reads each agent's metrics: here at the --metrics-url of each node, whose agent is a host process;\n   on a real cluster through the API server's proxy to the agent pods)")
	if err := p.show(ctx, []string{"top", "pods", "-n", namespace}, urls...); err != nil {
		return err
	}
	if err := p.show(ctx, []string{"top", "nodes"}, urls...); err != nil {
		return err
	}
	return p.show(ctx, []string{"inventory"})
}
