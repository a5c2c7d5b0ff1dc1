package standin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// ClientTimeout bounds each command a client sends, as a client of a hung
// daemon must not hang its caller.
const ClientTimeout = 10 * time.Second

// Main is the program: args without the program name (["-f"] for the
// daemon, none for a client), the environment from os.Getenv. It returns
// the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 1 && args[0] == "-f":
		return daemonMain(stderr)
	case len(args) == 0:
		return clientMain(stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "mps-control: unsupported arguments %q\nusage: mps-control -f   (run the daemon in the foreground)\n       mps-control < commands\n", args)
	return 2
}

func daemonMain(stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var devices []string
	if v := os.Getenv("CUDA_VISIBLE_DEVICES"); v != "" {
		devices = strings.Split(v, ",")
	}
	d := &Daemon{PipeDir: os.Getenv("CUDA_MPS_PIPE_DIRECTORY"), LogDir: os.Getenv("CUDA_MPS_LOG_DIRECTORY"), Devices: devices}
	err := d.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "mps-control:", err)
		return 1
	}
	return 0
}

func clientMain(stdin io.Reader, stdout, stderr io.Writer) int {
	pipe := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
	if pipe == "" {
		fmt.Fprintln(stderr, "mps-control: CUDA_MPS_PIPE_DIRECTORY is not set")
		return 1
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		cmd := strings.TrimSpace(sc.Text())
		if cmd == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), ClientTimeout)
		out, err := Send(ctx, pipe, cmd)
		cancel()
		if out != "" {
			fmt.Fprintln(stdout, out)
		}
		if err != nil {
			fmt.Fprintln(stderr, "mps-control:", err)
			return 1
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(stderr, "mps-control: reading commands:", err)
		return 1
	}
	return 0
}
