package imexstandin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/imex"
)

// Defaults of the Daemon's tunables.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
	DefaultFaultPoll  = 200 * time.Millisecond
)

// Daemon is a stand-in IMEX daemon. Set the exported fields, then Run.
type Daemon struct {
	// ConfigFile is the daemon's config file (-c).
	ConfigFile string
	// Address is its own address, a line of the nodes file; "": the first
	// line it can listen on.
	Address string
	// MinBackoff, doubling up to MaxBackoff, is the wait between attempts
	// to connect to a peer; zero: the defaults. Tests make them short.
	MinBackoff, MaxBackoff time.Duration
	// FaultPoll is how often it looks for its fault file; zero: the default.
	FaultPoll time.Duration

	cfg   imex.Config
	peers []string // the nodes file
	self  string
	hash  string
	state state
}

// Run serves until ctx ends, then closes every connection and its socket
// and returns ctx's error. It fails at once when the config or nodes file
// is wrong, another daemon serves its socket, or it can listen on no
// address of the nodes file.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.load(); err != nil {
		return err
	}
	ctl, err := d.openControl()
	if err != nil {
		return err
	}
	defer ctl.Close()
	ln, err := d.listen()
	if err != nil {
		return err
	}
	defer ln.Close()
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "address", d.self)
	ctx = klog.NewContext(ctx, logger)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	d.state.init(ctx, d.others())
	d.checkFault(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { d.accept(ctx, ln, &wg) })
	wg.Go(func() { d.serveControl(ctx, ctl) })
	wg.Go(func() { d.watchFault(ctx) })
	for _, p := range d.others() {
		wg.Go(func() { d.dialLoop(ctx, p) })
	}
	logger.Info("IMEX stand-in started", "port", d.cfg.ServerPort, "peers", d.peers, "quorum", d.cfg.WaitForQuorum, "socket", d.cfg.CmdUnixSocket)
	<-ctx.Done()
	// Closing the listeners ends their loops; ending ctx closed every
	// link (context.AfterFunc) and stops every dialer.
	ln.Close()
	ctl.Close()
	wg.Wait()
	logger.Info("IMEX stand-in stopped", "reason", context.Cause(ctx))
	return ctx.Err()
}

// load reads the config file and the nodes file it names.
func (d *Daemon) load() error {
	data, err := os.ReadFile(d.ConfigFile)
	if err != nil {
		return fmt.Errorf("IMEX config: %w", err)
	}
	if d.cfg, err = imex.ParseConfig(data); err != nil {
		return fmt.Errorf("IMEX config %s: %w", d.ConfigFile, err)
	}
	if d.cfg.CmdUnixSocket == "" {
		return fmt.Errorf("IMEX config %s: the stand-in needs IMEX_CMD_UNIX_DOMAIN_PATH, where imex-ctl finds it", d.ConfigFile)
	}
	if data, err = os.ReadFile(d.cfg.NodesFile); err != nil {
		return fmt.Errorf("IMEX nodes file (IMEX_NODE_CONFIG_FILE of %s): %w", d.ConfigFile, err)
	}
	if d.peers, err = imex.ParseNodesFile(data); err != nil {
		return fmt.Errorf("IMEX nodes file %s: %w", d.cfg.NodesFile, err)
	}
	d.hash = listHash(d.peers)
	for _, p := range []*time.Duration{&d.MinBackoff, &d.MaxBackoff, &d.FaultPoll} {
		if *p < 0 {
			return fmt.Errorf("negative backoff or fault poll %v", *p)
		}
	}
	d.MinBackoff = orDefault(d.MinBackoff, DefaultMinBackoff)
	d.MaxBackoff = max(orDefault(d.MaxBackoff, DefaultMaxBackoff), d.MinBackoff)
	d.FaultPoll = orDefault(d.FaultPoll, DefaultFaultPoll)
	return nil
}

// orDefault is v, or def when v is zero.
func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// listHash identifies a nodes list, order included: daemons agree only on
// the same list in the same order.
func listHash(peers []string) string {
	sum := sha256.Sum256([]byte(strings.Join(peers, "\n")))
	return hex.EncodeToString(sum[:8])
}

// listen listens on the daemon's own address and port, and settles which
// address that is.
func (d *Daemon) listen() (net.Listener, error) {
	port := strconv.Itoa(d.cfg.ServerPort)
	if d.Address != "" {
		if !slices.Contains(d.peers, d.Address) {
			return nil, fmt.Errorf("address %s is not a line of the nodes file %s", d.Address, d.cfg.NodesFile)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(d.Address, port))
		if err != nil {
			return nil, fmt.Errorf("listen for IMEX peers (SERVER_PORT of %s): %w", d.ConfigFile, err)
		}
		d.self = d.Address
		return ln, nil
	}
	var why []string
	for _, p := range d.peers {
		ln, err := net.Listen("tcp", net.JoinHostPort(p, port))
		if err == nil {
			d.self = p
			return ln, nil
		}
		why = append(why, err.Error())
	}
	return nil, fmt.Errorf("no line of the nodes file %s is an address this node can listen on at port %s: %s", d.cfg.NodesFile, port, strings.Join(why, "; "))
}

// others are the peers but the daemon itself, in the nodes file's order.
func (d *Daemon) others() []string {
	return slices.DeleteFunc(slices.Clone(d.peers), func(p string) bool { return p == d.self })
}

// openControl opens the command service's socket, replacing one that no
// daemon serves (left by a killed one).
func (d *Daemon) openControl() (net.Listener, error) {
	path := d.cfg.CmdUnixSocket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("IMEX command socket directory: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another IMEX daemon serves %s (IMEX_CMD_UNIX_DOMAIN_PATH of %s)", path, d.ConfigFile)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale IMEX command socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("IMEX command socket (IMEX_CMD_UNIX_DOMAIN_PATH of %s): %w", d.ConfigFile, err)
	}
	return ln, nil
}
