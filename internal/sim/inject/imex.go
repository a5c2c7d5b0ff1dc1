package inject

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tessera-gpu/tessera/internal/sim/imexstandin"
)

// imexOptions are the flags that fail or restore a stand-in IMEX daemon.
// The daemon is named by its config file, as the fault file lies beside
// it (imexstandin.FaultFile): a daemon run as nvidia-imex knows nothing of
// a node's simulator state, only its config.
type imexOptions struct {
	config      *string
	fail, clear *bool
}

func imexFlags(fs *flag.FlagSet) *imexOptions {
	return &imexOptions{
		config: fs.String("imex-config", "", "the stand-in IMEX daemon's config file (its -c), for --imex-fail and --imex-clear"),
		fail:   fs.Bool("imex-fail", false, "the IMEX daemon fails: NOT_READY, its peers dropped, until --imex-clear"),
		clear:  fs.Bool("imex-clear", false, "the IMEX daemon's fault clears: it connects to its peers again"),
	}
}

// given says whether any IMEX flag was given: then the call is about an
// IMEX daemon, not a GPU.
func (o *imexOptions) given() bool {
	return *o.config != "" || *o.fail || *o.clear
}

// run records or clears the fault and returns the exit status.
func (o *imexOptions) run(fs *flag.FlagSet, message string, stdout, stderr io.Writer) int {
	var gpuFlags []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "imex-config", "imex-fail", "imex-clear", "message":
		default:
			gpuFlags = append(gpuFlags, "--"+f.Name)
		}
	})
	var err error
	switch {
	case len(gpuFlags) > 0:
		err = fmt.Errorf("%v are a GPU's; --imex-* are an IMEX daemon's: give one kind", gpuFlags)
	case *o.fail == *o.clear:
		err = fmt.Errorf("give exactly one of --imex-fail, --imex-clear")
	case *o.config == "":
		err = fmt.Errorf("--imex-config is required with --imex-fail and --imex-clear")
	case *o.clear && message != "":
		err = fmt.Errorf("--message goes with --imex-fail")
	}
	if err != nil {
		fmt.Fprintln(stderr, "tessera-sim inject:", err)
		fs.Usage()
		return 2
	}
	// A fault file beside a mistyped path would fail no daemon.
	if fi, err := os.Stat(*o.config); err != nil || !fi.Mode().IsRegular() {
		fmt.Fprintf(stderr, "tessera-sim inject: no IMEX config file %s (the daemon's -c)\n", *o.config)
		return 1
	}
	if *o.clear {
		err = imexstandin.ClearFault(*o.config)
	} else {
		err = imexstandin.InjectFault(*o.config, message)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tessera-sim inject:", err)
		return 1
	}
	what := "recorded an IMEX fault" + quoted(message) + " for"
	if *o.clear {
		what = "cleared the IMEX fault of"
	}
	fmt.Fprintf(stdout, "%s the daemon of %s (%s) at %s\n", what, *o.config, imexstandin.FaultFile(*o.config), time.Now().Format("15:04:05.000"))
	return 0
}
