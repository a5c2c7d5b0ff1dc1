package mps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"k8s.io/klog/v2"
)

// MPS v3 (driver r615+, NVIDIA's "MPS v3 Interface", "Namespaces" and
// "Configuration File"): a daemon started with -p 3 hosts named servers,
// each with namespaces, and a client picks its namespace by the socket it
// connects to, <pipe>/<server>/<namespace>/control. A claim's containers
// mount only that directory, at their CUDA_MPS_PIPE_DIRECTORY, so the
// daemon's own control pipe, <pipe>/control, and the other namespaces'
// sockets are not in their view: a tenant can neither quit nor reconfigure
// the daemon serving its neighbours.
//
// Each daemon runs one server, serverName, over its devices. Its settings
// (a claim's own MPS limits) are in the config file the daemon starts
// with; the namespaces of shares are created and deleted while it runs. The
// flag names of the namespace commands follow NVIDIA's module-verb syntax
// (`server create --uid=...`) but are not verified against an r615 driver
// here (docs/sharing.md lists what is unproven).

// Protocol3 is Config.Protocol for MPS v3; 0 or 2 is legacy MPS.
const Protocol3 = 3

const (
	// serverName is the one server of each daemon.
	serverName = "tessera"
	// defaultNamespace is every server's implicit namespace: a claim's own
	// daemon serves its containers there.
	defaultNamespace = "default"
	// configName is the daemon's config file in <Root>/<id>.
	configName = "mps.toml"
	// cmdServerList answers in both protocols: the probe of a v3 daemon.
	cmdServerList = "get_server_list"
)

// v3Config is the config file's subset that Tessera writes.
type v3Config struct {
	SchemaVersion string              `toml:"schema_version"`
	Servers       map[string]v3Server `toml:"servers"`
}

type v3Server struct {
	AllowedDevices         string `toml:"allowed_devices"`
	PinnedMemoryLimit      string `toml:"pinned_memory_limit,omitempty"`
	ActiveThreadPercentage string `toml:"active_thread_percentage,omitempty"`
}

// writeV3Config writes spec's config file into dir: one server over its
// devices, with its defaults. A v3 server has one pinned memory limit, so
// where a claim's devices have several the smallest holds for all: never
// more than asked.
func writeV3Config(dir string, spec DaemonSpec) error {
	srv := v3Server{AllowedDevices: strings.Join(spec.Devices, ",")}
	if p := spec.ActiveThreadPercentage; p > 0 {
		srv.ActiveThreadPercentage = fmt.Sprint(p)
	}
	var least int64
	for _, l := range spec.PinnedMemoryLimits {
		if least == 0 || l < least {
			least = l
		}
	}
	if least > 0 {
		srv.PinnedMemoryLimit = pinnedMemLimit(least)
	}
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(v3Config{SchemaVersion: "1.0", Servers: map[string]v3Server{serverName: srv}}); err != nil {
		return fmt.Errorf("encode MPS config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, configName), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write MPS config: %w", err)
	}
	return nil
}

// namespaceDir is the host directory of a namespace's socket: what a
// client's container mounts.
func namespaceDir(root, id, ns string) string {
	return filepath.Join(pipeDir(root, id), serverName, ns)
}

// namespaceCreate and namespaceDelete are the control commands for a
// share's namespace.
func namespaceCreate(ns NamespaceSpec) string {
	c := []string{"namespace", "create", "--server=" + serverName, "--name=" + ns.Name}
	if ns.PinnedMemoryLimit > 0 {
		c = append(c, "--pinned-memory-limit="+pinnedMemLimit(ns.PinnedMemoryLimit))
	}
	if ns.ActiveThreadPercentage > 0 {
		c = append(c, fmt.Sprintf("--active-thread-percentage=%d", ns.ActiveThreadPercentage))
	}
	return strings.Join(c, " ")
}

func namespaceDelete(name string) string {
	return "namespace delete --server=" + serverName + " --name=" + name
}

// validNamespace accepts what may name a namespace: safe as one path
// component, not the server's implicit default.
func validNamespace(ns NamespaceSpec) error {
	if ns.Name == defaultNamespace {
		return fmt.Errorf("namespace %q is the server's implicit one", ns.Name)
	}
	if len(ns.Name) > 63 {
		return fmt.Errorf("namespace %q is longer than 63 characters", ns.Name)
	}
	if err := validID(ns.Name); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	if p := ns.ActiveThreadPercentage; p < 0 || p > 100 {
		return fmt.Errorf("namespace %s: active thread percentage %d is not within 1-100 (0: no cap)", ns.Name, p)
	}
	if l := ns.PinnedMemoryLimit; l != 0 && l < 1<<20 {
		return fmt.Errorf("namespace %s: pinned memory limit %d bytes is under 1 MiB", ns.Name, l)
	}
	return nil
}

// EnsureNamespace creates namespace ns in the server of the running daemon
// id (a daemon of this manager with Protocol3) and returns the directory
// of its socket. It is idempotent: a namespace that exists with the same
// settings is kept, with its clients.
func (m *Manager) EnsureNamespace(ctx context.Context, id string, ns NamespaceSpec) (string, error) {
	if m.protocol != Protocol3 {
		return "", fmt.Errorf("mps: namespace %s of daemon %s: the daemons run legacy MPS, which has no namespaces", ns.Name, id)
	}
	if err := errors.Join(validID(id), validNamespace(ns)); err != nil {
		return "", fmt.Errorf("mps: namespace of daemon %s: %w", id, err)
	}
	defer m.locks.Lock(id)()
	if _, err := m.send(ctx, pipeDir(m.root, id), namespaceCreate(ns)); err != nil {
		return "", fmt.Errorf("mps: create namespace %s in daemon %s: %w", ns.Name, id, err)
	}
	klog.FromContext(ctx).V(2).Info("MPS namespace ready", "mpsDaemon", id, "namespace", ns.Name)
	return namespaceDir(m.root, id, ns.Name), nil
}

// DeleteNamespace deletes namespace name of daemon id, dropping its
// clients. A daemon that does not run, or a namespace that does not exist,
// is not an error: with the daemon, its namespaces are gone.
func (m *Manager) DeleteNamespace(ctx context.Context, id, name string) error {
	if m.protocol != Protocol3 {
		return nil
	}
	if err := validID(id); err != nil {
		return fmt.Errorf("mps: delete namespace %s: %w", name, err)
	}
	defer m.locks.Lock(id)()
	st, err := m.inspect(ctx, klog.FromContext(ctx), id, nil)
	if err != nil {
		return fmt.Errorf("mps: delete namespace %s of daemon %s: %w", name, id, err)
	}
	if !st.running {
		return nil
	}
	if _, err := m.send(ctx, pipeDir(m.root, id), namespaceDelete(name)); err != nil {
		return fmt.Errorf("mps: delete namespace %s of daemon %s: %w", name, id, err)
	}
	return nil
}

// v3Argv is the daemon's command line under Protocol3.
func (m *Manager) v3Argv(id string) []string {
	return append(slices.Clone(m.control), "-f", "-p", "3", "-a", filepath.Join(m.dir(id), configName))
}
