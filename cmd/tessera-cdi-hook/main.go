// Command tessera-cdi-hook is the OCI hook Tessera's CDI specs name for a
// GPU share whose memory the node holds in the kernel (internal/memlimit):
//
//	tessera-cdi-hook limit --claim-uid=... --device=... --mechanism=dmem|nvml --region=... --bytes=...
//	    (createRuntime) sets the share's limit on the cgroup of the new container's pod
//	tessera-cdi-hook release
//	    (poststop) forgets what the deleted container held
//	tessera-cdi-hook check
//	    exits 0: the agent's start-up proof that the hook runs from its path
//	tessera-cdi-hook install --dir=/opt/tessera/bin
//	    copies itself onto the host (the chart's init container)
//	tessera-cdi-hook version (or --version)
//	    prints its version, commit and build date
//
// The runtime passes the container's OCI state on stdin. A failure exits 1
// with the claim, device and cause on stderr, which fails the container's
// creation: a share is never run without its limit.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/memlimit/nvmllimit"
	"github.com/tessera-gpu/tessera/internal/version"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, memlimit.HookName+":", err)
		os.Exit(1)
	}
}

// procRoot is the runtime's /proc ("" for /proc); only this package's
// tests set it.
var procRoot string

// env is the node as the hook reaches it; NVML is loaded only for its
// mechanism (a node without the NVIDIA library has no such limits).
func env(m memlimit.Mechanism) memlimit.Env {
	e := memlimit.Env{Proc: procRoot}
	if m == memlimit.NVML {
		e.NVML = nvmllimit.New()
	}
	return e
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("a subcommand is needed: %s, %s or install", memlimit.CmdLimit, memlimit.CmdRelease)
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case memlimit.CmdLimit:
		h, l, err := memlimit.Parse(cmd, rest)
		if err != nil {
			return err
		}
		st, err := memlimit.ReadState(os.Stdin)
		if err != nil {
			return fmt.Errorf("claim %s (%s), device %s: %w", l.Claim, l.ClaimUID, l.Device, err)
		}
		if err := memlimit.Apply(h, l, st, env(l.Mechanism)); err != nil {
			return fmt.Errorf("claim %s (%s), device %s, container %s: %w", l.Claim, l.ClaimUID, l.Device, st.ID, err)
		}
		return nil
	case memlimit.CmdRelease:
		h, _, err := memlimit.Parse(cmd, rest)
		if err != nil {
			return err
		}
		st, err := memlimit.ReadState(os.Stdin)
		if err != nil {
			return err
		}
		// A record of either mechanism may be released.
		return memlimit.Release(h, st.ID, env(memlimit.NVML))
	case memlimit.CmdCheck:
		return nil
	case "version", "--version":
		version.Print(os.Stdout, memlimit.HookName, false)
		return nil
	case "install":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		dir := fs.String("dir", "/opt/tessera/bin", "the host directory the runtime runs the hook from")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		dst, err := memlimit.Install(*dir)
		if err != nil {
			return err
		}
		fmt.Println("installed", dst)
		return nil
	default:
		return fmt.Errorf("unknown subcommand %q: %s, %s or install", cmd, memlimit.CmdLimit, memlimit.CmdRelease)
	}
}
