package nvml

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/pci"
)

// sysfs reads the PCI facts NVML does not report. Root is the host's "/"
// (--sysfs-root); tests point it at a fixture tree.
type sysfs struct{ root string }

func (s sysfs) devicePath(bdf string) string {
	return filepath.Join(s.root, "sys", "bus", "pci", "devices", bdf)
}

// pcieChain resolves sys/bus/pci/devices/<bdf>, a symlink into
// sys/devices/pciDDDD:BB/<bridges>/<bdf>, and returns the pciDDDD:BB
// component, the root complex (the same value
// k8s.io/dynamic-resource-allocation's deviceattribute package publishes as
// resource.kubernetes.io/pcieRoot), and the bridges between it and the
// GPU, root port first. Only the link text is read, so the chain below it
// need not exist.
func (s sysfs) pcieChain(bdf string) (string, []string, error) {
	p := s.devicePath(bdf)
	target, err := os.Readlink(p)
	if err != nil {
		return "", nil, fmt.Errorf("pcie root of %s: %w", bdf, err)
	}
	root, bridges, ok := pci.Chain(filepath.ToSlash(target), bdf)
	if !ok {
		return "", nil, fmt.Errorf("pcie root of %s: link %s -> %s names no pciDDDD:BB root", bdf, p, target)
	}
	return root, bridges, nil
}

// numaNode reads sys/bus/pci/devices/<bdf>/numa_node. The kernel writes -1
// where the platform gives no affinity; a missing file means the same.
func (s sysfs) numaNode(bdf string) (int, error) {
	b, err := os.ReadFile(filepath.Join(s.devicePath(bdf), "numa_node"))
	if os.IsNotExist(err) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("numa node of %s: %w", bdf, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < -1 {
		return -1, fmt.Errorf("numa node of %s: %q is not a node number", bdf, strings.TrimSpace(string(b)))
	}
	return n, nil
}
