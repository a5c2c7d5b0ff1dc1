package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
)

// Cgroup is a simulated node's cgroup hierarchy, as the machine file says:
// which version, and whether the kernel offers the dmem controller. The
// backend writes its root's interface files under the state directory
// (CgroupRoot), so the agent reads them as it reads /sys/fs/cgroup.
type Cgroup struct {
	Version int
	Dmem    bool
}

// CgroupRoot is the simulated node's cgroup mount (backend.CgroupRooter).
func (b *Backend) CgroupRoot() string { return filepath.Join(b.stateDir, "cgroup") }

// writeCgroup writes the root's files: a v1 hierarchy is per-controller
// directories; v2 lists its controllers, and with dmem one capacity line
// per GPU whose driver registers its memory (the vendor's rule).
func writeCgroup(root string, c Cgroup, node *inventory.Node) error {
	if err := os.RemoveAll(root); err != nil {
		return fmt.Errorf("cgroup tree %s: %w", root, err)
	}
	if c.Version == 1 {
		return os.MkdirAll(filepath.Join(root, "memory"), 0o755)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("cgroup tree %s: %w", root, err)
	}
	controllers := "cpuset cpu io memory hugetlb pids rdma misc"
	if c.Dmem {
		controllers += " dmem"
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte(controllers+"\n"), 0o644); err != nil {
		return fmt.Errorf("cgroup tree: %w", err)
	}
	if !c.Dmem {
		return nil
	}
	var lines strings.Builder
	for i := range node.GPUs {
		g := &node.GPUs[i]
		if caps := vendors.Capabilities(g.Vendor); isolation.RegistersRegion(caps, g) {
			fmt.Fprintf(&lines, "%s %d\n", fmt.Sprintf(caps.DmemRegion, g.PCIBusID), g.MemoryBytes)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "dmem.capacity"), []byte(lines.String()), 0o644); err != nil {
		return fmt.Errorf("cgroup tree: %w", err)
	}
	return nil
}
