package daemonpod

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

// Config configures New: the daemon pods' settings (the agent's image,
// its daemons' account, privilege and driver root), the client and the
// launcher's own limits.
type Config struct {
	nodepod.Settings
	Client kubernetes.Interface
	// Timeout bounds each wait for a pod to be gone; 0 means
	// mps.DefaultTimeout.
	Timeout time.Duration
	Logger  klog.Logger
}

// Launcher runs each daemon as a pod of its node. It is safe for
// concurrent use.
type Launcher struct {
	c Config

	owner nodepod.Owner // the Node, read at the first Launch
}

var _ mps.Launcher = (*Launcher)(nil)

// New returns a launcher for c. It calls no API: the Node is read at the
// first Launch, so an agent that never starts a daemon never asks.
func New(c Config) (*Launcher, error) {
	if err := c.Settings.Check(); err != nil {
		return nil, fmt.Errorf("daemonpod: %w", err)
	}
	if c.Client == nil {
		return nil, fmt.Errorf("daemonpod: no client")
	}
	if c.Timeout <= 0 {
		c.Timeout = mps.DefaultTimeout
	}
	return &Launcher{c: c}, nil
}

// Launch implements mps.Launcher: it creates the daemon's pod and returns
// without waiting for it to run (the Manager probes the pipe, calling Alive
// between tries). A pod already there under the name is one the Manager
// decided to replace: it is deleted, and the new one created once it is
// gone.
func (p *Launcher) Launch(ctx context.Context, l mps.Launch) (mps.Handle, error) {
	if l.ID == "" || len(l.Argv) == 0 || !filepath.IsAbs(l.Dir) {
		return mps.Handle{}, fmt.Errorf("daemonpod: launch daemon %q on node %s: want an id, a command and an absolute directory, got %q %q", l.ID, p.c.NodeName, l.Argv, l.Dir)
	}
	owner, err := p.owner.Get(ctx, p.c.Client, p.c.NodeName)
	if err != nil {
		return mps.Handle{}, fmt.Errorf("daemonpod: %w", err)
	}
	want := p.pod(l, owner)
	pods := p.c.Client.CoreV1().Pods(p.c.Namespace)
	created, err := pods.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		klog.FromContext(ctx).V(2).Info("Replacing the MPS daemon pod of the same name", "pod", klog.KObj(want))
		var old *corev1.Pod
		if old, err = pods.Get(ctx, want.Name, metav1.GetOptions{}); err == nil {
			err = p.deleteAndWait(ctx, want.Name, old.UID)
		} else if apierrors.IsNotFound(err) {
			err = nil
		}
		if err == nil {
			created, err = pods.Create(ctx, want, metav1.CreateOptions{})
		}
	}
	if err != nil {
		return mps.Handle{}, fmt.Errorf("daemonpod: create pod %s/%s for daemon %s on node %s: %w", p.c.Namespace, want.Name, l.ID, p.c.NodeName, err)
	}
	klog.FromContext(ctx).V(2).Info("Created MPS daemon pod", "pod", klog.KObj(created), "uid", created.UID, "devices", l.Devices)
	return mps.Handle{Pod: p.c.Namespace + "/" + created.Name, PodUID: string(created.UID)}, nil
}

// Kill implements mps.Launcher: it deletes the pod h names, if it is still
// that pod (UID), and waits until it is gone.
func (p *Launcher) Kill(ctx context.Context, h mps.Handle) error {
	ns, name, err := splitPod(h)
	if err != nil {
		return fmt.Errorf("daemonpod: kill on node %s: %w", p.c.NodeName, err)
	}
	if ns != p.c.Namespace {
		return fmt.Errorf("daemonpod: kill pod %s on node %s: not in namespace %s", h.Pod, p.c.NodeName, p.c.Namespace)
	}
	if h.PodUID == "" {
		return fmt.Errorf("daemonpod: kill pod %s on node %s: the handle has no UID", h.Pod, p.c.NodeName)
	}
	if err := p.deleteAndWait(ctx, name, types.UID(h.PodUID)); err != nil {
		return fmt.Errorf("daemonpod: kill pod %s on node %s: %w", h.Pod, p.c.NodeName, err)
	}
	return nil
}

// deleteAndWait deletes pod name while its UID is uid and waits, up to the
// timeout, until it is gone (nodepod.Delete).
func (p *Launcher) deleteAndWait(ctx context.Context, name string, uid types.UID) error {
	return nodepod.Delete(ctx, p.c.Client, p.c.Namespace, name, uid, p.c.Timeout)
}

// splitPod is the namespace and name of h.Pod.
func splitPod(h mps.Handle) (string, string, error) {
	ns, name, ok := strings.Cut(h.Pod, "/")
	if !ok || ns == "" || name == "" {
		return "", "", errors.New("handle names no pod (namespace/name): " + fmt.Sprintf("%+v", h))
	}
	return ns, name, nil
}
