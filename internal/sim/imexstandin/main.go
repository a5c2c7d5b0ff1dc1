package imexstandin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/tessera-gpu/tessera/internal/imex"
)

// CtlTimeout bounds imex-ctl's query, as a hung daemon must not hang its
// caller (a readiness probe).
const CtlTimeout = 5 * time.Second

// Main is the daemon program (`tessera-sim imex`, nvidia-imex): args
// without the program name. It logs to stderr and returns the exit
// status: 0 when stopped by SIGTERM or SIGINT, 1 when it cannot run, 2
// for wrong arguments.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("imex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("c", imex.DefaultConfigFile, "the config file")
	address := fs.String("address", "", "this node's address, a line of the nodes file (default: the first line it can listen on)")
	verbosity := fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(args); err != nil {
		return usageStatus(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "imex: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(stderr), textlogger.Verbosity(*verbosity)))
	ctx, stop := signal.NotifyContext(klog.NewContext(context.Background(), logger), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d := &Daemon{ConfigFile: *config, Address: *address}
	if err := d.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "imex:", err)
		return 1
	}
	return 0
}

// CtlMain is the control program (`tessera-sim imex-ctl`,
// nvidia-imex-ctl); only -q is modelled. It prints the daemon's status
// line and returns 0, or says why no daemon answered and returns 1; 2 for
// wrong arguments.
func CtlMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("imex-ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("c", imex.DefaultConfigFile, "the daemon's config file")
	query := fs.Bool("q", false, "print the daemon's status: READY, or NOT_READY and why")
	if err := fs.Parse(args); err != nil {
		return usageStatus(err)
	}
	if !*query || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "imex-ctl: the stand-in knows only -q: imex-ctl [-c config] -q")
		return 2
	}
	data, err := os.ReadFile(*config)
	var cfg imex.Config
	if err == nil {
		cfg, err = imex.ParseConfig(data)
	}
	if err == nil && cfg.CmdUnixSocket == "" {
		err = errors.New("no IMEX_CMD_UNIX_DOMAIN_PATH, where the stand-in serves its status")
	}
	if err != nil {
		fmt.Fprintf(stderr, "imex-ctl: config %s: %v\n", *config, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), CtlTimeout)
	defer cancel()
	status, err := Query(ctx, cfg.CmdUnixSocket)
	if err != nil {
		fmt.Fprintln(stderr, "imex-ctl:", err)
		return 1
	}
	fmt.Fprintln(stdout, status)
	return 0
}

// usageStatus is the exit status for a flag parsing error: 0 for -h.
func usageStatus(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
