package imexstandin

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/imex"
)

// The test binary doubles as the program (the os/exec tests' re-exec
// trick): run as "<test binary> imex ARGS" it is Main, a real process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "imex" {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// within bounds every wait of these tests: each waits for an event that
// takes milliseconds.
const within = 5 * time.Second

// freePort is a TCP port free on 127.0.0.1 now, for a domain's
// SERVER_PORT: every simulated tray listens on it at its own address.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// loopbacks are n trays' addresses: 127.0.0.1 to 127.0.0.n.
func loopbacks(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("127.0.0.%d", i))
	}
	return out
}

// tray is one simulated node's daemon files: its config (in a directory
// of its own, with its fault file and socket) and its nodes file.
type tray struct {
	config, socket string
}

// newTray writes a config for SERVER_PORT port and a nodes file of peers
// in a new directory.
func newTray(t *testing.T, port int, peers []string, quorum imex.Quorum) tray {
	t.Helper()
	dir := t.TempDir()
	nodes, err := imex.NodesFile(peers)
	if err != nil {
		t.Fatal(err)
	}
	c := imex.DefaultConfig()
	c.ServerPort = port
	c.NodesFile = filepath.Join(dir, "nodes_config.cfg")
	c.CmdUnixSocket = filepath.Join(dir, "imex.sock")
	c.WaitForQuorum = quorum
	tr := tray{config: filepath.Join(dir, "config.cfg"), socket: c.CmdUnixSocket}
	for path, data := range map[string][]byte{c.NodesFile: nodes, tr.config: c.Render()} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// domain is n trays of one domain on a free port.
func domain(t *testing.T, n int) []tray {
	port := freePort(t)
	var trays []tray
	for range n {
		trays = append(trays, newTray(t, port, loopbacks(n), imex.QuorumRecovery))
	}
	return trays
}

// running is a daemon run in this process.
type running struct {
	cancel  context.CancelFunc
	done    chan error
	stopped bool
	// log is what it logged.
	log ktesting.Buffer
}

// start runs a daemon for tr at address ("": found by listening), with
// short backoffs, until stop or the test's end.
func start(t *testing.T, tr tray, address string) *running {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(t.Context(), logger))
	d := &Daemon{ConfigFile: tr.config, Address: address, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, FaultPoll: 5 * time.Millisecond}
	r := &running{cancel: cancel, done: make(chan error, 1), log: logger.GetSink().(ktesting.Underlier).GetBuffer()}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	// Serving its socket means it listens for peers too.
	waitStatus(t, tr, "answering", func(string) bool { return true })
	return r
}

// stop stops the daemon and waits for Run to return (its connections and
// sockets closed). Stopping twice is no error.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel()
	select {
	case err := <-r.done:
		if err != context.Canceled {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	case <-time.After(within):
		t.Fatalf("daemon still runs %v after stop", within)
	}
}

// waitStatus polls tr's daemon until its status satisfies ok, and returns
// that status; after `within` the test fails with the last answer.
func waitStatus(t *testing.T, tr tray, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		last, err := Query(ctx, tr.socket)
		cancel()
		if err == nil && ok(last) {
			return last
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: status not %s within %v: %q, %v", tr.config, what, within, last, err)
		}
	}
}

// is and hasPrefix are status predicates.
func is(want string) func(string) bool { return func(s string) bool { return s == want } }

func hasPrefix(want string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, want) }
}
