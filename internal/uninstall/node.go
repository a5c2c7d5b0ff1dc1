package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/agent"
	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/handover"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// ErrClaimsPrepared: the node's checkpoint still holds claims; nothing
// was removed.
var ErrClaimsPrepared = errors.New("claims are still prepared on this node")

// defaultMPSRoot is the nvml backend's MPS root when --mps-root is empty.
const defaultMPSRoot = "/var/run/tessera/mps"

// Report is what Node did.
type Report struct {
	Destroyed []string // partitions, <gpu>/<partition>
	ModeOff   []string // GPUs whose MIG mode was turned off
	Removed   []string // host paths
}

// NewBackend builds the node's backend from the agent's flags
// (agent.NewBackend; a fake in tests).
type NewBackend func(context.Context, *agent.Config) (backend.Backend, error)

// Node cleans the node of everything the agent of c put there, once the
// agent has exited (it waits for the agent's handover lock) and only if
// its checkpoint holds no claim (ErrClaimsPrepared, naming them).
func Node(ctx context.Context, c *agent.Config, newBackend NewBackend) (*Report, error) {
	logger := klog.FromContext(ctx)
	// On a node whose agent never started the directory is missing; it
	// goes with the rest.
	if err := os.MkdirAll(c.PluginDataDir, 0o755); err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	lock, err := handover.Acquire(ctx, filepath.Join(c.PluginDataDir, handover.LockName))
	if err != nil {
		return nil, fmt.Errorf("wait for the agent to exit: %w", err)
	}
	defer lock.Release()
	cp, err := checkpoint.Read(c.CheckpointPath)
	if err != nil {
		return nil, fmt.Errorf("read the checkpoint: %w", err)
	}
	if len(cp.Claims) > 0 {
		var held []string
		for _, cl := range cp.Claims {
			held = append(held, fmt.Sprintf("%s/%s (%s, %s)", cl.Namespace, cl.Name, cl.UID, cl.State))
		}
		sort.Strings(held)
		return nil, fmt.Errorf("%w: %s; nothing was removed (delete their pods, let the kubelet unprepare them, and run the uninstall again)", ErrClaimsPrepared, strings.Join(held, ", "))
	}
	r := &Report{}
	b, err := newBackend(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("start the %s backend: %w", c.Backend, err)
	}
	if closer, ok := b.(io.Closer); ok {
		defer closer.Close()
	}
	if err := r.partitions(ctx, c, b, cp); err != nil {
		return r, err
	}
	var paths []string
	specs, err := cdi.OwnedPaths(c.CDIDir)
	if err != nil {
		return r, err
	}
	paths = append(paths, specs...)
	paths = append(paths, mpsRoot(c), memoryLimitStateDir(c, b))
	if c.MemoryLimitHook != "" {
		paths = append(paths, c.MemoryLimitHook)
	}
	// The kubelet registration socket(s) of the driver.
	sockets, err := filepath.Glob(filepath.Join(c.RegistrarDir, Driver+"*"))
	if err != nil {
		return r, fmt.Errorf("registration sockets: %w", err)
	}
	paths = append(paths, sockets...)
	paths = append(paths, c.CheckpointPath, c.PluginDataDir)
	for _, p := range paths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := removeAll(p); err != nil {
			return r, err
		}
		r.Removed = append(r.Removed, p)
	}
	logger.Info("Node cleaned", "partitionsDestroyed", r.Destroyed, "migModeOff", r.ModeOff, "removed", r.Removed)
	return r, nil
}

// partitions destroys, with dynamic partitioning, every partition (no
// claim holds one: the agent carved them all), and turns off the MIG mode
// the agent turned on. With static partitioning the partitions are the
// operator's and stay.
func (r *Report) partitions(ctx context.Context, c *agent.Config, b backend.Backend, cp *checkpoint.Checkpoint) error {
	modal := map[string]bool{}
	if c.Partitioning == "dynamic" {
		inv, err := b.Discover(ctx)
		if err != nil {
			return fmt.Errorf("discover the node's GPUs: %w", err)
		}
		for _, g := range inv.GPUs {
			if publish.IsModal(&g) {
				// A mode's partitions go with the mode: back to rest.
				if err := restMode(ctx, b, &g); err != nil {
					return err
				}
				modal[g.UUID] = true
				continue
			}
			for _, p := range g.Partitions {
				if err := b.DestroyPartition(ctx, g.UUID, p.UUID); err != nil {
					return fmt.Errorf("destroy partition %s of GPU %s: %w", p.UUID, g.UUID, err)
				}
				r.Destroyed = append(r.Destroyed, g.UUID+"/"+p.UUID)
			}
		}
	}
	for _, gpu := range cp.PartitionModeOn {
		if modal[gpu] {
			continue
		}
		if err := b.SetPartitionMode(ctx, gpu, false); err != nil {
			return fmt.Errorf("turn off MIG mode of GPU %s: %w", gpu, err)
		}
		r.ModeOff = append(r.ModeOff, gpu)
	}
	return nil
}

// mpsRoot is the agent's --mps-root as it resolves it.
func mpsRoot(c *agent.Config) string {
	switch {
	case c.MPSRoot != "":
		return c.MPSRoot
	case c.Backend == "sim":
		return sim.MPSRoot(c.SimStateDir)
	}
	return defaultMPSRoot
}

// memoryLimitStateDir is the memory limit hook's state directory as the
// agent resolves it (agent.Config.memoryLimitHook).
func memoryLimitStateDir(c *agent.Config, b backend.Backend) string {
	if c.MemoryLimitStateDir != "" {
		return c.MemoryLimitStateDir
	}
	if cr, ok := b.(backend.CgroupRooter); ok {
		return filepath.Join(filepath.Dir(cr.CgroupRoot()), "memory-limits")
	}
	return memlimit.DefaultStateDir
}

// removeAll removes p and what it holds. Where p is a mount point (the
// chart mounts the parents of what goes whole, but another deployment may
// not), what it holds goes and the empty directory stays.
func removeAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || !errors.Is(err, syscall.EBUSY) {
		if err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		return nil
	}
	entries, rerr := os.ReadDir(p)
	if rerr != nil {
		return fmt.Errorf("remove %s: %w (and listing it: %v)", p, err, rerr)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(p, e.Name())); err != nil {
			return fmt.Errorf("empty %s (a mount point): %w", p, err)
		}
	}
	return nil
}

// restMode sets g, a GPU whose partitions are a mode (AMD), to its rest
// mode (SPX, whole) if it is in another: what the agent would have done
// when its last claim went.
func restMode(ctx context.Context, b backend.Backend, g *inventory.GPU) error {
	rest := publish.RestMode(g)
	if g.Partitioning.Mode == rest {
		return nil
	}
	ms, ok := b.(backend.ModeSwitcher)
	if !ok {
		return fmt.Errorf("GPU %s is in partition mode %s and backend %s cannot set it back to %s", g.UUID, g.Partitioning.Mode, b.Name(), rest)
	}
	if err := ms.SwitchMode(ctx, g.UUID, rest); err != nil {
		return fmt.Errorf("set GPU %s back to partition mode %s: %w", g.UUID, rest, err)
	}
	return nil
}
