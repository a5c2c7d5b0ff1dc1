package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// The simulated node's /proc holds what the agent reads of the kernel
// beyond sysfs: /proc/devices, whose char device regions include the
// NVIDIA driver's IMEX channels (internal/imex), and the module's
// /proc/driver/nvidia/params, with the driver's default channel count. A
// machine without NVIDIA GPUs has neither region nor module.

// simIMEXMajor is the major the simulated driver's channel region gets
// (the kernel assigns a free one at load; 237 is what one real host read).
const simIMEXMajor = 237

// ProcRoot is the simulated node's /proc.
func (b *Backend) ProcRoot() string { return filepath.Join(b.stateDir, "proc") }

// writeProc writes the node's /proc files.
func writeProc(root string, n *inventory.Node) error {
	if !slices.ContainsFunc(n.GPUs, func(g inventory.GPU) bool { return g.Vendor == inventory.VendorNVIDIA }) {
		return nil
	}
	files := map[string]string{
		"devices":              fmt.Sprintf("Character devices:\n  1 mem\n  4 /dev/vc/0\n  5 /dev/tty\n195 nvidia-frontend\n%d nvidia-caps-imex-channels\n238 nvidia-caps\n508 nvidia-uvm\n\nBlock devices:\n  7 loop\n  8 sd\n259 blkext\n", simIMEXMajor),
		"driver/nvidia/params": "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nModifyDeviceFiles: 1\nImexChannelCount: 2048\nCreateImexChannel0: 0\n",
	}
	for p, content := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return fmt.Errorf("proc: %w", err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			return fmt.Errorf("proc: %w", err)
		}
	}
	return nil
}
