// Command bench-scheduler measures the real kube-scheduler placing pods
// with claims on fleets of Tessera nodes that exist only as objects
// (pkg/schedbench): `make bench-scheduler`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/schedbench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scheduler:", err)
		os.Exit(1)
	}
}

func run() error {
	repo := flag.String("repo", ".", "repository root")
	sizes := flag.String("nodes", "100,500", "fleet sizes, comma-separated")
	layouts := flag.String("layouts", "static,static-mig,dynamic,dynamic-window,shared", "layouts: static (whole H100s), static-mig (1g.10gb instances an operator cut beforehand), dynamic (MIG 1g.10gb carved on demand, every placement published), dynamic-window (the same with the agent's default window of 2), nvidia-dynamic (the same claim on what the NVIDIA DRA driver publishes with DynamicMIG), shared (7Gi of an L4); not run by default: amd-static (whole MI300Xs), amd-dynamic (one CPX partition of an MI300X carved on demand, every mode's partitions published), amd-dynamic-window (the same with the window of 2)")
	pods := flag.Int("pods", 100, "pods per run, each with its own claim")
	rate := flag.Float64("rate", 20, "pods created per second")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long a run waits for its pods to be bound")
	schedQPS := flag.Int("scheduler-qps", 1000, "kube-scheduler's API rate (its default 50 holds it to about 16 pods/s, each pod costing an allocation write, a binding and events); 0 keeps the default")
	profile := flag.Duration("cpu-profile", 0, "take a CPU profile of the kube-scheduler this long from the first pod of each run, written to _output/bench-scheduler/<layout>-<nodes>.pprof (go tool pprof)")
	flag.Parse()
	root, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []*schedbench.Result
	for _, ln := range strings.Split(*layouts, ",") {
		var l *schedbench.Layout
		for i := range schedbench.Layouts {
			if schedbench.Layouts[i].Name == ln {
				l = &schedbench.Layouts[i]
			}
		}
		if l == nil {
			return fmt.Errorf("--layouts: no layout %q", ln)
		}
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return fmt.Errorf("--nodes: %q is not a fleet size", s)
			}
			r, err := once(ctx, root, *l, n, runOpts{*pods, *rate, *timeout, *schedQPS, *profile})
			if err != nil {
				return fmt.Errorf("%s, %d nodes: %w", ln, n, err)
			}
			results = append(results, r)
			fmt.Printf("%-8s %4d nodes: %d/%d pods bound, %.1f pods/s (created %.1f/s), time to bind p50 %s p99 %s max %s (setup %s)\n",
				r.Layout, r.Nodes, r.Scheduled, r.Pods, r.PodsPerSecond, r.CreatedPerSecond, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond), r.SetupTook.Round(time.Second))
		}
	}
	fmt.Printf("\n| layout | nodes | pods | pods/s | created/s | p50 | p99 |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Printf("| %s | %d | %d/%d | %.1f | %.1f | %s | %s |\n", r.Layout, r.Nodes, r.Scheduled, r.Pods, r.PodsPerSecond, r.CreatedPerSecond, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond))
	}
	return nil
}

// runOpts is what each layout and size is run with.
type runOpts struct {
	pods     int
	rate     float64
	timeout  time.Duration
	schedQPS int
	profile  time.Duration
}

// once runs one layout and size on a fresh control plane (no kubelets).
func once(ctx context.Context, root string, l schedbench.Layout, nodes int, o runOpts) (*schedbench.Result, error) {
	c := localcluster.ForRepo(root)
	c.Dir = filepath.Join(root, "_output/bench-cluster")
	c.Nodes = nil
	if o.schedQPS > 0 {
		c.SchedulerArgs = []string{"--kube-api-qps=" + strconv.Itoa(o.schedQPS), "--kube-api-burst=" + strconv.Itoa(2*o.schedQPS)}
	}
	if o.profile > 0 {
		c.SchedulerArgs = append(c.SchedulerArgs, profileArgs...)
	}
	if err := c.Up(ctx, os.Stderr); err != nil {
		return nil, err
	}
	defer func() {
		if err := c.Down(os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "cluster down:", err)
		}
	}()
	// Setting up 500 nodes is thousands of creates; the pods' rate is
	// the benchmark's own.
	client, err := c.ClientWithRate(2000, 4000)
	if err != nil {
		return nil, err
	}
	var started func()
	profiled := make(chan error, 1)
	if o.profile > 0 {
		s, err := c.LoadState()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(root, "_output/bench-scheduler", fmt.Sprintf("%s-%d.pprof", l.Name, nodes))
		started = func() { go func() { profiled <- schedulerProfile(ctx, s.Ports["scheduler"], o.profile, path) }() }
	} else {
		profiled <- nil
	}
	r, err := schedbench.Run(ctx, client, l, nodes, o.pods, o.rate, o.timeout, started)
	if err != nil {
		return nil, err
	}
	return r, <-profiled
}
