package uninstall

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/agent"
	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// node is an agent's configuration on a node of temporary directories,
// with the files an agent leaves there once its claims are gone, beside
// another vendor's spec and a kubelet socket of another driver, which
// must stay.
type node struct {
	cfg    agent.Config
	owned  []string // Tessera's
	others []string // not Tessera's
}

func newNode(t *testing.T, partitioning string) *node {
	t.Helper()
	root := t.TempDir()
	n := &node{cfg: agent.Config{
		NodeName: "n1", Backend: "sim", SimProfile: "dgx-h100", Partitioning: partitioning,
		SimStateDir:     filepath.Join(root, "sim"),
		PluginDataDir:   filepath.Join(root, "kubelet/plugins/gpu.tessera.dev"),
		RegistrarDir:    filepath.Join(root, "kubelet/plugins_registry"),
		CDIDir:          filepath.Join(root, "cdi"),
		MemoryLimitHook: filepath.Join(root, "bin/tessera-cdi-hook"),
	}}
	n.cfg.CheckpointPath = filepath.Join(n.cfg.PluginDataDir, "checkpoint.json")
	write := func(p string, owned bool) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if owned {
			n.owned = append(n.owned, p)
		} else {
			n.others = append(n.others, p)
		}
	}
	write(filepath.Join(n.cfg.CDIDir, "k8s.gpu.tessera.dev-claim_1b4e28ba-2fa1-11d2-883f-0016d3cca427.json"), true)
	write(filepath.Join(n.cfg.CDIDir, "k8s.gpu.tessera.dev-nccl-topo", "1b4e28ba-2fa1-11d2-883f-0016d3cca427.xml"), true)
	write(filepath.Join(n.cfg.CDIDir, "nvidia.yaml"), false)
	write(filepath.Join(n.cfg.RegistrarDir, "gpu.tessera.dev-reg.sock"), true)
	write(filepath.Join(n.cfg.RegistrarDir, "other.example.com-reg.sock"), false)
	write(n.cfg.MemoryLimitHook, true)
	write(filepath.Join(filepath.Dir(n.cfg.MemoryLimitHook), "someone-elses-hook"), false)
	write(filepath.Join(sim.MPSRoot(n.cfg.SimStateDir), "gpu-0", "control.log"), true)
	write(filepath.Join(n.cfg.SimStateDir, "memory-limits", "record"), true)
	write(filepath.Join(n.cfg.PluginDataDir, "plugin.sock"), true)
	return n
}

// simBackend is the simulator's backend of the node, the real one.
func simBackend(_ context.Context, c *agent.Config) (backend.Backend, error) {
	m, err := sim.Profile(c.SimProfile, c.NodeName)
	if err != nil {
		return nil, err
	}
	return sim.New(m, c.SimStateDir)
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestNodeRemovesWhatTesseraPutThere: with no claim prepared, Node removes
// every file of Tessera's (claim specs, the hook, sockets, MPS and memory
// limit state, the checkpoint and the plugin directory) and nothing else;
// with dynamic partitioning it destroys the partitions carved, and turns
// off the MIG mode the checkpoint says the agent turned on.
func TestNodeRemovesWhatTesseraPutThere(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, "dynamic")
	b, err := simBackend(ctx, &n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := b.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[0]
	if err := b.SetPartitionMode(ctx, g.UUID, true); err != nil {
		t.Fatal(err)
	}
	prof := g.Partitioning.Profiles[0]
	if _, err := b.CreatePartition(ctx, g.UUID, prof.Name, prof.Placements[0]); err != nil {
		t.Fatal(err)
	}
	cp := checkpoint.New()
	cp.PartitionModeOn = []string{g.UUID}
	if err := checkpoint.NewStore(n.cfg.CheckpointPath).Save(cp); err != nil {
		t.Fatal(err)
	}
	r, err := Node(ctx, &n.cfg, simBackend)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(n.owned, n.cfg.CheckpointPath, n.cfg.PluginDataDir) {
		if exists(t, p) {
			t.Errorf("%s is left", p)
		}
	}
	for _, p := range n.others {
		if !exists(t, p) {
			t.Errorf("%s, not Tessera's, was removed", p)
		}
	}
	if len(r.Destroyed) != 1 || !slices.Equal(r.ModeOff, []string{g.UUID}) {
		t.Errorf("destroyed %q, MIG mode off %q; want the one partition carved and %s", r.Destroyed, r.ModeOff, g.UUID)
	}
	gpus, err := sim.ReadState(n.cfg.SimStateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, gs := range gpus {
		if len(gs.Partitions) > 0 || (gs.UUID == g.UUID && gs.PartitioningEnabled != nil && *gs.PartitioningEnabled) {
			t.Errorf("GPU %s: partitions %v, MIG mode %v after the cleanup", gs.UUID, gs.Partitions, gs.PartitioningEnabled)
		}
	}
}

// TestNodeKeepsStaticPartitions: with static partitioning the partitions
// are the operator's: none is destroyed.
func TestNodeKeepsStaticPartitions(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, "static")
	b, err := simBackend(ctx, &n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := b.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[0]
	if err := b.SetPartitionMode(ctx, g.UUID, true); err != nil {
		t.Fatal(err)
	}
	prof := g.Partitioning.Profiles[0]
	if _, err := b.CreatePartition(ctx, g.UUID, prof.Name, prof.Placements[0]); err != nil {
		t.Fatal(err)
	}
	r, err := Node(ctx, &n.cfg, simBackend)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Destroyed) != 0 {
		t.Errorf("static partitioning: destroyed %q", r.Destroyed)
	}
}

// TestNodeRefusesPreparedClaims: a claim in the checkpoint stops the
// cleanup before anything is removed, and the error names it.
func TestNodeRefusesPreparedClaims(t *testing.T) {
	n := newNode(t, "static")
	cp := checkpoint.New()
	cp.Claims["uid-1"] = &checkpoint.Claim{UID: "uid-1", Namespace: "ml", Name: "train-gpu", State: checkpoint.PrepareCompleted}
	if err := checkpoint.NewStore(n.cfg.CheckpointPath).Save(cp); err != nil {
		t.Fatal(err)
	}
	_, err := Node(context.Background(), &n.cfg, simBackend)
	if !errors.Is(err, ErrClaimsPrepared) || !containsAll(err.Error(), "ml/train-gpu", "uid-1") {
		t.Fatalf("Node: %v, want ErrClaimsPrepared naming ml/train-gpu", err)
	}
	for _, p := range append(n.owned, n.cfg.CheckpointPath) {
		if !exists(t, p) {
			t.Errorf("refused, yet %s was removed", p)
		}
	}
}

// TestNodeRestsModes: on a dynamic AMD node a GPU the agent left in
// another compute mode goes back to SPX, its partitions with it; nothing
// is destroyed one by one.
func TestNodeRestsModes(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, "dynamic")
	n.cfg.SimProfile = "mi300x-8"
	b, err := simBackend(ctx, &n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := b.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[3]
	if err := b.(backend.ModeSwitcher).SwitchMode(ctx, g.UUID, "QPX"); err != nil {
		t.Fatal(err)
	}
	cp := checkpoint.New()
	cp.PartitionModeOn = []string{g.UUID}
	if err := checkpoint.NewStore(n.cfg.CheckpointPath).Save(cp); err != nil {
		t.Fatal(err)
	}
	r, err := Node(ctx, &n.cfg, simBackend)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Destroyed) != 0 || len(r.ModeOff) != 0 {
		t.Errorf("destroyed %q, MIG mode off %q; want neither", r.Destroyed, r.ModeOff)
	}
	b, err = simBackend(ctx, &n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if inv, err = b.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inv.GPUs[3].Partitioning.Mode; got != "SPX" {
		t.Errorf("GPU left in %s, want SPX", got)
	}
}
