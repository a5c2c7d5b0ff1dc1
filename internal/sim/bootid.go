package sim

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-gpu/tessera/internal/fsutil"
	"github.com/tessera-gpu/tessera/internal/host"
	"github.com/tessera-gpu/tessera/internal/mps"
)

// A simulated node reboots without its host: its boot id is the file
// <state-dir>/boot_id when there is one, else the host's. The backend's
// precedence is WithBootID, then that file, then the host's
// (/proc/sys/kernel/random/boot_id). The agent and the MPS daemons take
// the backend's, so a new id in the file is a reboot to all of them:
// partitions, MIG mode and time-slice intervals go (state.go), claims
// from before are unconfirmed (internal/claims).

// BootIDFile is the simulated node's boot id, in its state directory.
const BootIDFile = "boot_id"

// ReadBootID returns the boot id of the simulated node in stateDir: its
// BootIDFile, or the host's when it has none.
func ReadBootID(stateDir string) (string, error) {
	p := filepath.Join(stateDir, BootIDFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return host.BootID()
	}
	if err != nil {
		return "", fmt.Errorf("read simulated boot id: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", fmt.Errorf("read simulated boot id: %s is empty", p)
	}
	return id, nil
}

// MPSRoot is where the agent runs a simulated node's MPS daemons unless
// told otherwise (--mps-root).
func MPSRoot(stateDir string) string { return filepath.Join(stateDir, "mps") }

// Reboot does to the simulated node in stateDir what a reboot does to its
// hardware: its MPS daemons under mpsRoot die ("": none) and their
// directories, on tmpfs on a real node, go; then it gets a fresh boot id,
// which the next agent start sees. The agent must be down. It returns the
// new boot id and the PIDs of the daemons it killed.
func Reboot(stateDir, mpsRoot string) (string, []int, error) {
	var pids []int
	if mpsRoot != "" {
		var err error
		if pids, err = mps.KillAll(mpsRoot); err != nil {
			return "", pids, fmt.Errorf("reboot %s: %w", stateDir, err)
		}
		if err := os.RemoveAll(mpsRoot); err != nil {
			return "", pids, fmt.Errorf("reboot %s: remove MPS directory: %w", stateDir, err)
		}
	}
	id, err := newBootID()
	if err != nil {
		return "", pids, fmt.Errorf("reboot %s: %w", stateDir, err)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return "", pids, fmt.Errorf("reboot %s: %w", stateDir, err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(stateDir, BootIDFile), []byte(id+"\n"), 0o644); err != nil {
		return "", pids, fmt.Errorf("reboot %s: write boot id: %w", stateDir, err)
	}
	return id, pids, nil
}

// newBootID is a random version-4 UUID, as the kernel's boot ids are.
func newBootID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new boot id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
