package daemonpod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/fsutil"
	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

// DefaultTimeout bounds each wait for the daemon's pod to be gone.
const DefaultTimeout = 30 * time.Second

// Config configures New: the daemon pods' settings (the agent's image,
// its daemons' account, privilege and driver root), the client and the
// daemon's own.
type Config struct {
	nodepod.Settings
	Client kubernetes.Interface
	// Dir is the host directory of the daemon's config file, nodes file
	// and command socket, at the same path in the pod and in the agent.
	Dir string
	// Program is the daemon program with its leading arguments, as the pod
	// runs it (nvidia-imex); "-c <config>" follows.
	Program []string
	// Env is the daemon's environment (a driver root's LD_LIBRARY_PATH).
	Env map[string]string
	// Port is the daemon's SERVER_PORT (imex.DefaultServerPort when 0).
	Port int
	// Timeout bounds each wait for a pod to be gone (DefaultTimeout
	// when 0).
	Timeout time.Duration
}

// Daemon runs the node's IMEX daemon as a pod. It is safe for concurrent
// use.
type Daemon struct {
	c     Config
	owner nodepod.Owner
	mu    sync.Mutex
}

// New returns the daemon of c. It calls no API.
func New(c Config) (*Daemon, error) {
	if err := c.Settings.Check(); err != nil {
		return nil, fmt.Errorf("IMEX daemon pod: %w", err)
	}
	if c.Client == nil || len(c.Program) == 0 {
		return nil, fmt.Errorf("IMEX daemon pod: no client or no daemon program")
	}
	if !filepath.IsAbs(c.Dir) {
		return nil, fmt.Errorf("IMEX daemon pod: directory %q is not an absolute path", c.Dir)
	}
	if c.Port == 0 {
		c.Port = imex.DefaultServerPort
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	c.Dir = filepath.Clean(c.Dir)
	return &Daemon{c: c}, nil
}

// ConfigFile is the daemon's config file, which its control program reads
// to find the command socket.
func (d *Daemon) ConfigFile() string { return d.c.ConfigFile() }

// Config is the config file the daemon is started with: Tessera's
// defaults, no quorum, the command service on the socket in Dir only.
func (d *Daemon) Config() imex.Config {
	cfg := imex.DefaultConfig()
	cfg.ServerPort = d.c.Port
	cfg.NodesFile = filepath.Join(d.c.Dir, NodesName)
	cfg.WaitForQuorum = imex.QuorumNone
	cfg.CmdUnixSocket = filepath.Join(d.c.Dir, SocketName)
	return cfg
}

// Ensure makes the daemon of domain run on the node: a live pod of the
// domain is adopted as it is; a dead one, or one of another domain, is
// replaced by a new one with the domain's peers as they are now. It does
// not wait for the daemon to be ready (the control program says when).
func (d *Daemon) Ensure(ctx context.Context, domain string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	pods := d.c.Client.CoreV1().Pods(d.c.Namespace)
	name := PodName(d.c.NodeName)
	cur, err := pods.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return fmt.Errorf("IMEX daemon pod %s/%s of node %s: %w", d.c.Namespace, name, d.c.NodeName, err)
	}
	logger := klog.FromContext(ctx)
	if cur != nil {
		why := nodepod.NotAlive(cur, ContainerName)
		if why == "" && cur.Annotations[AnnotationDomain] == domain {
			return nil
		}
		if why == "" {
			why = fmt.Sprintf("serves domain %q", cur.Annotations[AnnotationDomain])
		}
		logger.Info("Replacing the node's IMEX daemon pod", "pod", klog.KObj(cur), "reason", why, "fabricDomain", domain)
		if err := nodepod.Delete(ctx, d.c.Client, d.c.Namespace, name, cur.UID, d.c.Timeout); err != nil {
			return fmt.Errorf("IMEX daemon pod %s/%s of node %s: replace it: %w", d.c.Namespace, name, d.c.NodeName, err)
		}
	}
	peers, err := Peers(ctx, d.c.Client, domain)
	if err != nil {
		return fmt.Errorf("IMEX daemon of node %s: %w", d.c.NodeName, err)
	}
	nodes, err := d.writeFiles(peers)
	if err != nil {
		return fmt.Errorf("IMEX daemon of node %s: %w", d.c.NodeName, err)
	}
	owner, err := d.owner.Get(ctx, d.c.Client, d.c.NodeName)
	if err != nil {
		return fmt.Errorf("IMEX daemon pod: %w", err)
	}
	created, err := pods.Create(ctx, d.c.Spec(domain, peersHash(nodes), owner), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("IMEX daemon of node %s: create pod %s/%s: %w", d.c.NodeName, d.c.Namespace, name, err)
	}
	logger.Info("Started the node's IMEX daemon pod", "pod", klog.KObj(created), "fabricDomain", domain, "peers", peers)
	return nil
}

// writeFiles writes the nodes file of peers and the config file, each
// whole or not at all, and removes the socket a previous daemon left. It
// returns the nodes file.
func (d *Daemon) writeFiles(peers []string) ([]byte, error) {
	nodes, err := imex.NodesFile(peers)
	if err != nil {
		return nil, err
	}
	cfg := d.Config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d.c.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := fsutil.WriteFileAtomic(cfg.NodesFile, nodes, 0o644); err != nil {
		return nil, err
	}
	if err := fsutil.WriteFileAtomic(d.c.ConfigFile(), cfg.Render(), 0o644); err != nil {
		return nil, err
	}
	if err := os.Remove(cfg.CmdUnixSocket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return nodes, nil
}

// Stop stops the node's daemon: its pod is deleted and gone when Stop
// returns. No pod is not an error.
func (d *Daemon) Stop(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	name := PodName(d.c.NodeName)
	cur, err := d.c.Client.CoreV1().Pods(d.c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop the IMEX daemon pod %s/%s of node %s: %w", d.c.Namespace, name, d.c.NodeName, err)
	}
	if err := nodepod.Delete(ctx, d.c.Client, d.c.Namespace, name, cur.UID, d.c.Timeout); err != nil {
		return fmt.Errorf("stop the IMEX daemon pod %s/%s of node %s: %w", d.c.Namespace, name, d.c.NodeName, err)
	}
	klog.FromContext(ctx).Info("Stopped the node's IMEX daemon pod: no claim here holds an IMEX channel", "pod", klog.KObj(cur))
	return nil
}
