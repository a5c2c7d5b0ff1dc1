// Package workload is `tessera-sim load`: it records what runs on a device
// of a simulated node (utilization, memory held) in the node's state
// directory, where that node's agent reads it at its next telemetry poll
// (internal/sim, load.go and telemetry.go), as it would a real GPU's.
package workload

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// Main runs `tessera-sim load` with args and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tessera-sim load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "the simulated node's --sim-state-dir (required)")
	device := fs.String("device", "", "the GPU or partition: its device name as published (gpu-3, gpu-0-mig-1g-10gb-0) or its UUID (required)")
	util := fs.Float64("util", 0, "how busy it is, percent (0..100)")
	memory := fs.String("memory", "0", "the memory it holds: bytes or a Kubernetes quantity (30Gi)")
	clear := fs.Bool("clear", false, "it is idle again (forget its load)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tessera-sim load --state-dir=DIR --device=NAME|UUID (--util=PERCENT --memory=QUANTITY | --clear)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	usageErr := func(err error) int {
		fmt.Fprintln(stderr, "tessera-sim load:", err)
		fs.Usage()
		return 2
	}
	if *stateDir == "" || *device == "" {
		return usageErr(fmt.Errorf("--state-dir and --device are required"))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *clear && (set["util"] || set["memory"]) {
		return usageErr(fmt.Errorf("--clear takes no --util or --memory"))
	}
	l := sim.Load{UtilizationPercent: *util}
	if !*clear {
		q, err := resource.ParseQuantity(*memory)
		if err != nil {
			return usageErr(fmt.Errorf("--memory: %q is not a quantity (bytes, or e.g. 30Gi)", *memory))
		}
		l.MemoryUsedBytes = q.Value()
		if err := l.Validate(); err != nil {
			return usageErr(err)
		}
	}
	uuid, err := resolve(*stateDir, *device)
	if err == nil {
		if *clear {
			err = sim.ClearLoad(*stateDir, uuid)
		} else {
			err = sim.SetLoad(*stateDir, uuid, l)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "tessera-sim load:", err)
		return 1
	}
	if *clear {
		fmt.Fprintf(stdout, "%s (%s) is idle\n", *device, uuid)
		return 0
	}
	fmt.Fprintf(stdout, "%s (%s) runs at %g%% with %s of memory\n", *device, uuid, l.UtilizationPercent, resource.NewQuantity(l.MemoryUsedBytes, resource.BinarySI))
	return 0
}

// resolve maps a device name or UUID, of a GPU or a partition, to its
// UUID, naming devices as the agent's slices do.
func resolve(stateDir, device string) (string, error) {
	gpus, err := sim.StateGPUs(stateDir)
	if err != nil {
		return "", err
	}
	state, err := sim.ReadState(stateDir)
	if err != nil {
		return "", err
	}
	gpuNames, err := publish.GPUNames(&inventory.Node{GPUs: gpus})
	if err != nil {
		return "", err
	}
	var known []string
	for _, g := range state {
		name := gpuNames[g.UUID]
		if device == name || device == g.UUID {
			return g.UUID, nil
		}
		known = append(known, name)
		for _, p := range g.Partitions {
			if pn := publish.PartitionName(name, p); device == pn || device == p.UUID {
				return p.UUID, nil
			}
		}
	}
	slices.Sort(known)
	return "", fmt.Errorf("no device %q on this node; its GPUs are %s (a partition is named <gpu>-<kind>-<profile>-<start>, or by its UUID)", device, strings.Join(known, ", "))
}
