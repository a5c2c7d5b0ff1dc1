package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/tessera-gpu/tessera/internal/sim"
)

// reboot is `tessera-sim reboot`: the simulated node's hardware forgets
// what a reboot wipes (internal/sim, bootid.go). Its agent must be down;
// it sees the reboot when it starts.
func reboot(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tessera-sim reboot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "the simulated node's --sim-state-dir (required)")
	mpsRoot := fs.String("mps-root", "", "the node agent's --mps-root, whose MPS daemons die (default <state-dir>/mps)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tessera-sim reboot --state-dir=DIR [--mps-root=DIR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *stateDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "tessera-sim reboot: --state-dir is required and nothing else")
		fs.Usage()
		return 2
	}
	if *mpsRoot == "" {
		*mpsRoot = sim.MPSRoot(*stateDir)
	}
	id, pids, err := sim.Reboot(*stateDir, *mpsRoot)
	if err != nil {
		fmt.Fprintln(stderr, "tessera-sim reboot:", err)
		return 1
	}
	fmt.Fprintf(stdout, "rebooted %s: boot id %s, %d MPS daemons killed %v\n", *stateDir, id, len(pids), pids)
	return 0
}
