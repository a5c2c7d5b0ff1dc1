// Command tessera-sim holds the simulator's helper programs, one subcommand
// each:
//
//	tessera-sim mps-control [-f]   stand-in for nvidia-cuda-mps-control (internal/sim/standin)
//	tessera-sim inject ...         a GPU fault for a simulated node's agent (internal/sim/inject)
//	tessera-sim load ...           a device's workload, for its telemetry (internal/sim/workload)
//	tessera-sim reboot ...         a simulated node's reboot: new boot id, its MPS daemons gone (internal/sim)
//	tessera-sim version            its version (also --version)
//
// Run under the name nvidia-cuda-mps-control (a copy or link in a driver
// root, as the local cluster makes one), it is the stand-in:
// `nvidia-cuda-mps-control -f` is `tessera-sim mps-control -f`.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/tessera-gpu/tessera/internal/sim/inject"
	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/internal/sim/workload"
	"github.com/tessera-gpu/tessera/internal/version"
)

// subcommand runs with the arguments after its name and returns the exit
// status.
type subcommand struct {
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var subcommands = map[string]subcommand{
	"mps-control": {"stand-in for nvidia-cuda-mps-control: -f runs the daemon, no flags sends stdin's commands", standin.Main},
	"inject": {"record a GPU fault (--xid, --ecc-sbe, --ecc-dbe, --lost) or its clearing (--clear) in a simulated node's state", func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return inject.Main(args, stdout, stderr)
	}},
	"load": {"set what runs on a simulated device (--util, --memory) or make it idle (--clear), for its telemetry", func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return workload.Main(args, stdout, stderr)
	}},
	"reboot": {"reboot a simulated node (--state-dir) while its agent is down: a new boot id, its MPS daemons killed", func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return reboot(args, stdout, stderr)
	}},
}

func main() {
	os.Exit(run(argsAs(os.Args[0], os.Args[1:]), os.Stdin, os.Stdout, os.Stderr))
}

// mpsControlName is the name under which it is the MPS stand-in.
const mpsControlName = "nvidia-cuda-mps-control"

// argsAs is the arguments run takes for a program invoked as name with
// args: under mpsControlName, those of the mps-control subcommand.
func argsAs(name string, args []string) []string {
	if filepath.Base(name) == mpsControlName {
		return append([]string{"mps-control"}, args...)
	}
	return args
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "version" {
		version.Print(stdout, "tessera-sim", false)
		return 0
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tessera-sim: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
	return sc.run(args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tessera-sim <subcommand> [arguments]\n       tessera-sim --version\n\nsubcommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, subcommands[n].summary)
	}
}
