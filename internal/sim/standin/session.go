package standin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// ExitDaemonGone is a client session's exit status when its daemon no
// longer serves it, as a CUDA client of a dead MPS server fails.
const ExitDaemonGone = 3

// sessionMain is "mps-control client [--hold] [--interval=D]": a client of
// the daemon whose control FIFO is in $CUDA_MPS_PIPE_DIRECTORY (legacy: the
// daemon's pipe directory; v3: a namespace's directory).
func sessionMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mps-control client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hold := fs.Bool("hold", false, "stay connected, pinging, until SIGTERM or the daemon is gone")
	interval := fs.Duration("interval", 200*time.Millisecond, "time between pings with --hold")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *interval <= 0 {
		fmt.Fprintf(stderr, "mps-control client: unsupported arguments %q\n", args)
		return 2
	}
	pipe := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
	if pipe == "" {
		fmt.Fprintln(stderr, "mps-control client: CUDA_MPS_PIPE_DIRECTORY is not set")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s := session{pipe: pipe, id: "--" + flagPID + "=" + strconv.Itoa(os.Getpid())}
	if ns := pidNamespace(); ns != "" {
		s.id += " --" + flagPIDNamespace + "=" + ns
	}
	if err := s.send(ctx, "connect"); err != nil {
		fmt.Fprintln(stderr, "mps-control client:", err)
		return 1
	}
	fmt.Fprintln(stdout, "connected")
	if !*hold {
		return 0
	}
	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The daemon may be gone already; the exit is clean either way.
			dctx, cancel := context.WithTimeout(context.Background(), ClientTimeout)
			defer cancel()
			if err := s.send(dctx, "disconnect"); err != nil {
				fmt.Fprintln(stderr, "mps-control client: disconnect:", err)
			}
			return 0
		case <-t.C:
		}
		err := s.send(ctx, "ping")
		switch {
		case errors.Is(err, ErrNoDaemon) || errors.Is(err, ErrUnknownClient):
			fmt.Fprintln(stderr, "mps-control client: lost the MPS server:", err)
			return ExitDaemonGone
		case err != nil && ctx.Err() == nil:
			// A slow daemon is not a gone one.
			fmt.Fprintln(stderr, "mps-control client: ping:", err)
		}
	}
}

// session is a client's identity on the wire.
type session struct {
	pipe string
	// id is the PID flags every client command carries.
	id string
}

func (s session) send(ctx context.Context, verb string) error {
	ctx, cancel := context.WithTimeout(ctx, ClientTimeout)
	defer cancel()
	_, err := Send(ctx, s.pipe, moduleClient+" "+verb+" "+s.id)
	return err
}
