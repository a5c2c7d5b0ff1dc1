package isolation

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// Host is what the node's kernel offers for device memory limits.
type Host struct {
	// Root is the cgroup mount read (/sys/fs/cgroup on a node).
	Root string
	// CgroupV2 is true where Root is a cgroup v2 (unified) hierarchy.
	CgroupV2 bool
	// Dmem is true where the v2 root offers the dmem controller.
	Dmem bool
	// Regions are the device memory regions of the root's dmem.capacity
	// with their sizes in bytes ("drm/0000:03:00.0/vram0").
	Regions map[string]int64
	// Hook is the memory limit hook the claims' CDI specs name, and
	// HookInstalled whether it is there: without it no share is held by
	// the kernel (a spec naming a missing hook fails every container).
	Hook          memlimit.Hook
	HookInstalled bool
}

// FindHook fills in whether h's binary is installed: a regular file that
// runs (its check subcommand exits 0), at the same path in the agent's
// mount namespace as on the host (the chart mounts the hook directory at
// its host path).
func (h *Host) FindHook(hook memlimit.Hook) error {
	h.Hook, h.HookInstalled = hook, false
	if hook.Path == "" {
		return nil
	}
	fi, err := os.Stat(hook.Path)
	if err != nil {
		return fmt.Errorf("memory limit hook: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("memory limit hook %s is not an executable file (%s)", hook.Path, fi.Mode())
	}
	// Run it once: a hook that cannot run from there (a noexec mount, a
	// binary this host cannot load) would fail every share's container.
	ctx, cancel := context.WithTimeout(context.Background(), hookCheckTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, hook.Path, memlimit.CmdCheck).CombinedOutput(); err != nil {
		return fmt.Errorf("memory limit hook %s does not run (%s %s): %w: %s", hook.Path, hook.Path, memlimit.CmdCheck, err, strings.TrimSpace(string(out)))
	}
	h.HookInstalled = true
	return nil
}

// hookCheckTimeout bounds the start-up run of the hook.
const hookCheckTimeout = 10 * time.Second

// ReadHost reads the cgroup hierarchy mounted at root. A root that is not
// cgroup v2 (no cgroup.controllers: v1, or nothing mounted) is not an
// error: its Host offers nothing.
func ReadHost(root string) (Host, error) {
	h := Host{Root: root}
	data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("cgroup root %s: %w", root, err)
	}
	h.CgroupV2 = true
	for _, c := range strings.Fields(string(data)) {
		h.Dmem = h.Dmem || c == "dmem"
	}
	if !h.Dmem {
		return h, nil
	}
	if h.Regions, err = readCapacity(filepath.Join(root, "dmem.capacity")); err != nil {
		return h, err
	}
	return h, nil
}

// readCapacity parses dmem.capacity: one "region bytes" line per region.
func readCapacity(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dmem capacity: %w", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: %q is not \"region bytes\"", path, n, line)
		}
		size, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("%s:%d: region %s: size %q is not a byte count", path, n, fields[0], fields[1])
		}
		out[fields[0]] = size
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
