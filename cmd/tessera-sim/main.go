// Command tessera-sim holds the simulator's helper programs, one subcommand
// each:
//
//	tessera-sim mps-control [-f]   stand-in for nvidia-cuda-mps-control (internal/sim/standin)
//	tessera-sim imex -c CONFIG     stand-in for the IMEX daemon nvidia-imex (internal/sim/imexstandin)
//	tessera-sim imex-ctl -c CONFIG -q   stand-in for nvidia-imex-ctl: the IMEX daemon's status
//	tessera-sim inject ...         a GPU fault for a simulated node's agent, or an IMEX daemon's (internal/sim/inject)
//	tessera-sim load ...           a device's workload, for its telemetry (internal/sim/workload)
//	tessera-sim reboot ...         a simulated node's reboot: new boot id, its MPS daemons gone (internal/sim)
//	tessera-sim version            its version (also --version)
//
// Run under the name nvidia-cuda-mps-control (a copy or link in a driver
// root, as the local cluster makes one), it is the stand-in:
// `nvidia-cuda-mps-control -f` is `tessera-sim mps-control -f`. So too
// under the names nvidia-imex and nvidia-imex-ctl: `nvidia-imex -c CONFIG`
// is `tessera-sim imex -c CONFIG`.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/tessera-gpu/tessera/internal/sim/imexstandin"
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
	"imex": {"stand-in for nvidia-imex: -c CONFIG runs the IMEX daemon in the foreground", func(args []string, _ io.Reader, _, stderr io.Writer) int {
		return imexstandin.Main(args, stderr)
	}},
	"imex-ctl": {"stand-in for nvidia-imex-ctl: -c CONFIG -q prints the IMEX daemon's status (READY, or NOT_READY and why)", func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return imexstandin.CtlMain(args, stdout, stderr)
	}},
	"inject": {"record a GPU fault (--xid, --ecc-sbe, --ecc-dbe, --lost) or its clearing (--clear) in a simulated node's state, or fail an IMEX daemon (--imex-fail, --imex-clear)", func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
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

// programs are the driver's program names under which it is a stand-in,
// and the subcommand each is.
var programs = map[string]string{
	"nvidia-cuda-mps-control": "mps-control",
	"nvidia-imex":             "imex",
	"nvidia-imex-ctl":         "imex-ctl",
}

// argsAs is the arguments run takes for a program invoked as name with
// args: under a name of programs, those of its subcommand.
func argsAs(name string, args []string) []string {
	if sub, ok := programs[filepath.Base(name)]; ok {
		return append([]string{sub}, args...)
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
