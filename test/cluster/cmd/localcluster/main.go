// Command localcluster brings a local Kubernetes cluster with simulated GPU
// nodes up or down: `localcluster up`, `localcluster down`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("localcluster", flag.ExitOnError)
	root := fs.String("repo", ".", "repository root")
	dir := fs.String("dir", "", "cluster state directory (default <repo>/_output/cluster)")
	binDir := fs.String("bin-dir", "", "cluster binaries (default <repo>/_output/cluster-bin)")
	plugin := fs.String("plugin", "", "tessera-kubelet-plugin binary (default <repo>/bin/tessera-kubelet-plugin)")
	webhook := fs.String("webhook", "", "tessera-webhook binary (default <repo>/bin/tessera-webhook)")
	nodes := fs.String("nodes", "", "nodes as name=profile[:partitioning[:sharing]],... (default gpu-h100=dgx-h100,gpu-mi300x=mi300x-8,gpu-mixed=mixed-inference,gpu-h100-dynamic=dgx-h100:dynamic,gpu-l4-shared=l4-4:static:capacity)")
	runtime := fs.String("runtime", localcluster.RuntimeFake, "container runtime of the nodes: fake (a fake CRI; the agents run as host processes) or containerd (containerd, runc and CNI per node; the agents run as the chart's DaemonSet)")
	workloads := fs.Bool("workloads", false, "turn on the Workload API and gang scheduling with pod-group claims (feature gates "+strings.Join(localcluster.WorkloadGates, ", ")+"; API "+localcluster.WorkloadAPI+"), off by default in Kubernetes 1.37")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: localcluster [flags] up|down")
		fs.PrintDefaults()
	}
	if len(os.Args) < 2 {
		fs.Usage()
		return fmt.Errorf("missing command")
	}
	cmd := os.Args[1]
	if err := fs.Parse(os.Args[2:]); err != nil {
		return err
	}
	repo, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	c := localcluster.ForRepo(repo)
	for _, f := range []struct {
		flag *string
		dst  *string
	}{{dir, &c.Dir}, {binDir, &c.BinDir}, {plugin, &c.PluginBin}, {webhook, &c.WebhookBin}} {
		if *f.flag != "" {
			if *f.dst, err = filepath.Abs(*f.flag); err != nil {
				return err
			}
		}
	}
	c.Workloads = *workloads
	switch *runtime {
	case localcluster.RuntimeFake, localcluster.RuntimeContainerd:
		c.Runtime = *runtime
	default:
		return fmt.Errorf("--runtime %q: want fake or containerd", *runtime)
	}
	if *nodes != "" {
		if c.Nodes, err = localcluster.ParseNodes(*nodes); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "up":
		return c.Up(ctx, os.Stdout)
	case "down":
		if err := c.Down(os.Stdout); err != nil {
			return err
		}
		fmt.Println("cluster down")
		return nil
	default:
		fs.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	}
}
