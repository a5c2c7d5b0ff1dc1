package standin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ClientTimeout bounds each command a client sends, as a client of a hung
// daemon must not hang its caller.
const ClientTimeout = 10 * time.Second

// Main is the program: args without the program name, the environment
// from os.Getenv. It returns the exit status.
//
//	-f [-p 2|3] [-a FILE]   the daemon, in the foreground (-a needs protocol 3)
//	-q                      send quit
//	client [--hold] [--interval=D]   a client session (session.go)
//	(none)                  send each line of stdin
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case slices.Contains(args, "-f"):
		d, err := daemonArgs(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "-f" }))
		if err != nil {
			fmt.Fprintf(stderr, "mps-control: %v\n%s", err, usage)
			return 2
		}
		return daemonMain(d, stderr)
	case len(args) == 1 && args[0] == "-q":
		return clientMain(strings.NewReader("quit\n"), stdout, stderr)
	case len(args) > 0 && args[0] == moduleClient:
		return sessionMain(args[1:], stdout, stderr)
	case len(args) == 0:
		return clientMain(stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "mps-control: unsupported arguments %q\n%s", args, usage)
	return 2
}

const usage = `usage: mps-control -f [-p 2|3] [-a config.toml]   (run the daemon in the foreground)
       mps-control -q                             (send quit)
       mps-control client [--hold] [--interval=200ms]
       mps-control < commands
`

// daemonArgs reads the daemon's flags after -f, and its environment.
func daemonArgs(args []string) (*Daemon, error) {
	d := &Daemon{PipeDir: os.Getenv("CUDA_MPS_PIPE_DIRECTORY"), LogDir: os.Getenv("CUDA_MPS_LOG_DIRECTORY")}
	if v := os.Getenv("CUDA_VISIBLE_DEVICES"); v != "" {
		d.Devices = strings.Split(v, ",")
	}
	protocol := os.Getenv("CUDA_MPS_PROTOCOL_VERSION")
	for i := 0; i < len(args); i++ {
		if i+1 == len(args) || (args[i] != "-p" && args[i] != "-a") {
			return nil, fmt.Errorf("unsupported arguments %q", args)
		}
		if args[i] == "-p" {
			protocol = args[i+1]
		} else {
			d.ConfigFile = args[i+1]
		}
		i++
	}
	switch protocol {
	case "", "2":
	case "3":
		d.Protocol = 3
	default:
		return nil, fmt.Errorf("protocol %q is not 2 or 3 (-p, CUDA_MPS_PROTOCOL_VERSION)", protocol)
	}
	return d, nil
}

func daemonMain(d *Daemon, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
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
