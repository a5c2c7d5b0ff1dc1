// Command demo brings up the local cluster, walks through the scenarios in
// demo/, and brings the cluster down again (unless --keep-cluster).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

const namespace = "tessera-demo"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	repo := flag.String("repo", ".", "repository root")
	keep := flag.Bool("keep-cluster", false, "leave the cluster running afterwards")
	nodes := flag.String("nodes", "", "nodes as name=profile,... (default: the local cluster's)")
	flag.Parse()
	root, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	c := localcluster.ForRepo(root)
	// The gang scenarios need the Workload API (docs/training.md).
	c.Workloads = true
	// The rack scenario needs two GB200 trays of one multi-node NVLink
	// domain, each running the IMEX daemon stand-in, and their agents
	// offering the domain's channels (docs/rack.md); the AMD one a node
	// that carves compute partitions on demand.
	c.Nodes = append(slices.Clone(localcluster.DefaultNodes), demoNodes...)
	c.IMEXChannels = 4
	if *nodes != "" {
		if c.Nodes, err = localcluster.ParseNodes(*nodes); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("== bringing up a local cluster with simulated GPU nodes")
	if err := c.Up(ctx, os.Stdout); err != nil {
		return err
	}
	if !*keep {
		defer func() {
			fmt.Println("\n== bringing the cluster down")
			if err := c.Down(os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "demo: cluster down:", err)
			}
		}()
	}
	client, err := c.Client()
	if err != nil {
		return err
	}
	if err := prepareNamespace(ctx, client); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(root, "demo", "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	// The kubectl plugin (bin/kubectl-tessera; on PATH it is `kubectl
	// tessera`) explains a pod that stays Pending, and shows the fleet
	// at work while the last scenario's pods run.
	p := plugin{root: root, c: c}
	failed := 0
	sawFinale := false
	for _, f := range files {
		var whileRunning func([]*scenario.Placement) error
		if filepath.Base(f) == finaleFile {
			whileRunning = func(pl []*scenario.Placement) error {
				sawFinale = true
				return finale(ctx, p, pl)
			}
		}
		if err := show(ctx, c, client, p, f, whileRunning); err != nil {
			failed++
			fmt.Printf("  FAILED: %v\n", err)
		}
	}
	views := [][]string{{"topo", "gpu-h100"}, {"topo", "gpu-mi300x"}}
	if !sawFinale {
		views = append([][]string{{"inventory"}}, views...)
	}
	for _, args := range views {
		if err := p.show(ctx, args); err != nil {
			failed++
			fmt.Printf("  FAILED: %v\n", err)
		}
	}
	if *keep {
		fmt.Printf("\nThe cluster is still up: KUBECONFIG=%s kubectl get resourceslices\n", c.Kubeconfig())
		fmt.Println("Stop it with: make cluster-down")
	}
	if failed > 0 {
		return fmt.Errorf("%d scenarios failed; logs in %s", failed, c.LogDir())
	}
	return nil
}

// demoNodes are the nodes the demo adds to the local cluster's defaults,
// for scenarios no default node serves: the rack, two compute trays of one
// domain (19-rack-job-one-domain.yaml), and an MI300X node partitioned
// dynamically (22-amd-cpx-on-demand.yaml), declared as the end-to-end
// suite's is. They are the demo's alone, so `make cluster-up` keeps its
// five kubelets.
var demoNodes = []localcluster.Node{
	{Name: "gb200-tray-1", Profile: "gb200-nvl72-tray"},
	{Name: "gb200-tray-2", Profile: "gb200-nvl72-tray"},
	{Name: "gpu-mi300x-dynamic", Profile: "mi300x-8", Partitioning: "dynamic"},
}

func prepareNamespace(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// Pods are admitted only once the namespace's default service account exists.
	return scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// show runs one scenario: applies it, waits for each pod's expected
// outcome, describes where the running pods landed, calls whileRunning
// (if set) with their placements, and deletes it all.
func show(ctx context.Context, c *localcluster.Config, client kubernetes.Interface, p plugin, path string, whileRunning func([]*scenario.Placement) error) error {
	sc, err := scenario.Load(path)
	if err != nil {
		return err
	}
	fmt.Printf("\n== %s\n   %s\n", filepath.Base(path), sc.Comment())
	fmt.Println("  asked:")
	for _, a := range sc.Asked() {
		fmt.Println("    " + a)
	}
	if why, err := sc.Missing(ctx, client); err != nil {
		return err
	} else if why != "" {
		fmt.Println("  skipped: " + why)
		return nil
	}
	if err := sc.Apply(ctx, client, namespace); err != nil {
		return err
	}
	defer func() {
		if err := sc.Delete(ctx, client, namespace, 90*time.Second); err != nil {
			fmt.Printf("  cleanup: %v\n", err)
		}
	}()
	for _, what := range slices.Sorted(maps.Keys(sc.Rejected)) {
		fmt.Printf("  %s refused at admission; the API server says:\n    %s\n", what, sc.Rejected[what])
	}
	var running []string
	explained := map[string]bool{}
	for _, pod := range sc.Pods {
		switch {
		case scenario.ExpectsUnschedulable(pod) && scenario.GroupOf(pod) != "":
			// A gang: every member waits; the group is explained once.
			msg, err := scenario.WaitUnschedulable(ctx, client, namespace, pod.Name, 60*time.Second)
			if err != nil {
				return err
			}
			g := scenario.GroupOf(pod)
			if explained[g] {
				continue
			}
			explained[g] = true
			fmt.Printf("  the pods of gang %s stay Pending, holding nothing; the scheduler says:\n    %s\n", g, msg)
			if err := p.show(ctx, []string{"explain", "podgroup/" + g, "-n", namespace}); err != nil {
				return err
			}
		case scenario.ExpectsUnschedulable(pod):
			msg, err := scenario.WaitUnschedulable(ctx, client, namespace, pod.Name, 60*time.Second)
			if err != nil {
				return err
			}
			fmt.Printf("  pod %s stays Pending; the scheduler says:\n    %s\n", pod.Name, msg)
			if err := p.show(ctx, []string{"explain", "pod/" + pod.Name, "-n", namespace}); err != nil {
				return err
			}
		case scenario.ExpectsPrepareFailure(pod):
			msg, err := scenario.WaitPrepareFailed(ctx, client, namespace, pod.Name, 60*time.Second)
			if err != nil {
				return err
			}
			fmt.Printf("  pod %s is scheduled but its node refuses the claim; the kubelet's event says:\n    %s\n", pod.Name, msg)
		default:
			running = append(running, pod.Name)
		}
	}
	if err := scenario.WaitRunning(ctx, client, namespace, running, 90*time.Second); err != nil {
		return err
	}
	var placements []*scenario.Placement
	for _, name := range running {
		pl, err := scenario.Describe(ctx, client, namespace, name, c.RecordDir)
		if err != nil {
			return err
		}
		pl.Print(os.Stdout)
		printTimeSlices(c, pl)
		placements = append(placements, pl)
	}
	if whileRunning != nil {
		return whileRunning(placements)
	}
	return nil
}

// printTimeSlices shows the compute time slice the driver set on the GPUs a
// pod got, read from the simulated hardware's state, where it is not the
// default.
func printTimeSlices(c *localcluster.Config, pl *scenario.Placement) {
	data, err := os.ReadFile(filepath.Join(c.NodeDir(pl.Node), "sim", "state.json"))
	if err != nil {
		return
	}
	var st struct {
		GPUs []struct {
			UUID      string `json:"uuid"`
			TimeSlice string `json:"timeSlice"`
		} `json:"gpus"`
	}
	if json.Unmarshal(data, &st) != nil {
		return
	}
	for _, cl := range pl.Claims {
		for _, d := range cl.Devices {
			for _, g := range st.GPUs {
				if g.UUID == pl.UUID[d.Pool+"/"+d.Device] && g.TimeSlice != "" {
					fmt.Printf("  the driver set GPU %s's compute time slice to %s (simulated hardware state)\n", d.Device, g.TimeSlice)
				}
			}
		}
	}
}
