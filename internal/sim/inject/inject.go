// Package inject is `tessera-sim inject`: it records a hardware fault (an
// XID, ECC errors, a lost GPU) or its clearing in a simulated node's state
// directory, where that node's agent picks it up within a second, exactly
// as it would a real GPU's signal (internal/sim, health.go). With
// --imex-fail or --imex-clear it fails or restores a stand-in IMEX daemon
// instead (imex.go).
package inject

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// Main runs `tessera-sim inject` with args and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tessera-sim inject", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "the simulated node's --sim-state-dir (required)")
	device := fs.String("device", "", "the GPU: its device name as published (gpu-3) or its UUID (required)")
	xid := fs.Int64("xid", 0, "an NVIDIA XID error with this code (79: fallen off the bus, 13: application error, ...)")
	sbe := fs.Int64("ecc-sbe", 0, "this many more corrected (single-bit) ECC errors")
	dbe := fs.Int64("ecc-dbe", 0, "this many more uncorrected (double-bit) ECC errors")
	lost := fs.Bool("lost", false, "the GPU stops answering")
	clear := fs.Bool("clear", false, "the GPU is back after a reset: every condition clears, counters restart")
	message := fs.String("message", "", "what happened, in words (shown in the pod status, or the IMEX daemon's)")
	imexFlags := imexFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tessera-sim inject --state-dir=DIR --device=gpu-N (--xid=N | --ecc-sbe=N | --ecc-dbe=N | --lost | --clear) [--message=TEXT]")
		fmt.Fprintln(stderr, "       tessera-sim inject --imex-config=FILE (--imex-fail [--message=TEXT] | --imex-clear)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if imexFlags.given() {
		return imexFlags.run(fs, *message, stdout, stderr)
	}
	ev, err := event(*xid, *sbe, *dbe, *lost, *clear)
	if err == nil && (*stateDir == "" || *device == "") {
		err = fmt.Errorf("--state-dir and --device are required")
	}
	if err != nil {
		fmt.Fprintln(stderr, "tessera-sim inject:", err)
		fs.Usage()
		return 2
	}
	ev.Message = *message
	if ev.UUID, err = resolve(*stateDir, *device); err != nil {
		fmt.Fprintln(stderr, "tessera-sim inject:", err)
		return 1
	}
	rec, err := sim.AppendFault(*stateDir, ev)
	if err != nil {
		fmt.Fprintln(stderr, "tessera-sim inject:", err)
		return 1
	}
	fmt.Fprintf(stdout, "recorded %s on %s (%s)%s at %s\n", describe(rec), *device, rec.UUID, quoted(rec.Message), rec.Time.Format("15:04:05.000"))
	return 0
}

// event is the one signal the flags ask for.
func event(xid, sbe, dbe int64, lost, clear bool) (backend.HealthEvent, error) {
	var evs []backend.HealthEvent
	if xid != 0 {
		evs = append(evs, backend.HealthEvent{Kind: backend.HealthXID, Code: xid})
	}
	if sbe != 0 {
		evs = append(evs, backend.HealthEvent{Kind: backend.HealthECCSingleBit, Count: sbe})
	}
	if dbe != 0 {
		evs = append(evs, backend.HealthEvent{Kind: backend.HealthECCDoubleBit, Count: dbe})
	}
	if lost {
		evs = append(evs, backend.HealthEvent{Kind: backend.HealthLost})
	}
	if clear {
		evs = append(evs, backend.HealthEvent{Kind: backend.HealthRecovered})
	}
	switch {
	case len(evs) != 1:
		return backend.HealthEvent{}, fmt.Errorf("give exactly one of --xid, --ecc-sbe, --ecc-dbe, --lost, --clear")
	case xid < 0 || sbe < 0 || dbe < 0:
		return backend.HealthEvent{}, fmt.Errorf("codes and counts must be positive")
	}
	return evs[0], nil
}

// resolve maps a device name (gpu-3) or a UUID to the GPU's UUID, naming
// GPUs as the agent's slices do.
func resolve(stateDir, device string) (string, error) {
	gpus, err := sim.StateGPUs(stateDir)
	if err != nil {
		return "", err
	}
	names, err := publish.GPUNames(&inventory.Node{GPUs: gpus})
	if err != nil {
		return "", err
	}
	var known []string
	for uuid, name := range names {
		if device == name || device == uuid {
			return uuid, nil
		}
		known = append(known, name)
	}
	return "", fmt.Errorf("no GPU %q on this node; it has %s (a partition's faults are its GPU's: name the GPU)", device, strings.Join(sortedNames(known), ", "))
}

func describe(ev backend.HealthEvent) string {
	switch ev.Kind {
	case backend.HealthXID:
		return fmt.Sprintf("XID %d", ev.Code)
	case backend.HealthECCSingleBit, backend.HealthECCDoubleBit:
		return fmt.Sprintf("%s (now %d)", ev.Kind, ev.Count)
	}
	return string(ev.Kind)
}

func quoted(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" %q", s)
}
