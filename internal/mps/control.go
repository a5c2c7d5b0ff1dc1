package mps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The control program's protocol: the environment it reads and the
// commands internal/mps sends it.

const (
	// EnvDaemonID marks a daemon process with its id, so it can be found
	// in /proc even when its PID was never recorded.
	EnvDaemonID = "TESSERA_MPS_DAEMON"
	// EnvLibraryPath is where a daemon of a driver root finds the
	// driver's libraries (Config.LibraryPath).
	EnvLibraryPath = "LD_LIBRARY_PATH"

	envVisibleDevices = "CUDA_VISIBLE_DEVICES"
	envPipeDir        = "CUDA_MPS_PIPE_DIRECTORY"
	envLogDir         = "CUDA_MPS_LOG_DIRECTORY"
)

// Commands of nvidia-cuda-mps-control's shell that internal/mps sends.
const (
	// cmdProbe is a harmless query: a daemon that answers it accepts
	// clients.
	cmdProbe = "get_default_active_thread_percentage"
	cmdQuit  = "quit"
)

// settingsCommands are the commands that apply spec's defaults, in a
// stable order (devices in the claim's order).
func settingsCommands(spec DaemonSpec) []string {
	var cmds []string
	if p := spec.ActiveThreadPercentage; p > 0 {
		cmds = append(cmds, fmt.Sprintf("set_default_active_thread_percentage %d", p))
	}
	for _, dev := range spec.Devices {
		if limit, ok := spec.PinnedMemoryLimits[dev]; ok {
			cmds = append(cmds, fmt.Sprintf("set_default_device_pinned_mem_limit %s %s", dev, pinnedMemLimit(limit)))
		}
	}
	return cmds
}

// pinnedMemLimit formats a limit in bytes as the control program takes it:
// an integer with the qualifier M or G (NVIDIA's MPS documentation), here
// always whole MiB, rounded down so the cap is never above what was asked.
// Limits under 1 MiB are refused by validate.
func pinnedMemLimit(bytes int64) string { return fmt.Sprintf("%dM", bytes>>20) }

// withEnv returns the agent's environment with the given variables set,
// dropping inherited values of the same names and of EnvDaemonID (only a
// daemon may carry it, or a control client would look like one in /proc).
func withEnv(set map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok || k == EnvDaemonID {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// send runs the control program as a client with one command on stdin and
// returns what it printed. It is bounded by timeout: a client stuck on a
// daemon that does not answer must not hang the agent.
func (m *Manager) send(ctx context.Context, pipe, command string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.control[0], m.control[1:]...)
	cmd.Env = withEnv(map[string]string{envPipeDir: pipe})
	cmd.Stdin = strings.NewReader(command + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A grandchild holding the output pipe must not keep Run waiting.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		if text != "" {
			return text, fmt.Errorf("%s %q: %w: %s", m.control[0], command, err, text)
		}
		return text, fmt.Errorf("%s %q: %w", m.control[0], command, err)
	}
	return text, nil
}

// apply waits until the daemon answers the probe, retrying with a bounded
// backoff until ctx ends, the manager's timeout passes or gone reports the
// daemon dead (waiting longer is pointless then), and sends spec's
// settings once each.
func (m *Manager) apply(ctx context.Context, spec DaemonSpec, pipe string, gone func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	delay := 5 * time.Millisecond
	probe := cmdProbe
	if m.protocol == Protocol3 {
		probe = cmdServerList
	}
	for {
		_, err := m.send(ctx, pipe, probe)
		if err == nil {
			break
		}
		if gone() {
			return fmt.Errorf("the daemon exited before it accepted commands (last try: %w)", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the daemon did not accept commands: %w (last try: %w)", context.Cause(ctx), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
	if m.protocol == Protocol3 {
		// The config file the daemon started with holds the settings.
		return nil
	}
	for _, c := range settingsCommands(spec) {
		if _, err := m.send(ctx, pipe, c); err != nil {
			return fmt.Errorf("apply setting: %w", err)
		}
	}
	return nil
}

// validate checks spec before anything is written or launched.
func validate(spec DaemonSpec) error {
	if err := validID(spec.ID); err != nil {
		return err
	}
	if len(spec.Devices) == 0 {
		return errors.New("no devices")
	}
	seen := map[string]bool{}
	for _, d := range spec.Devices {
		if d == "" || strings.ContainsAny(d, ", \t\n") {
			return fmt.Errorf("device %q is not a UUID", d)
		}
		if seen[d] {
			return fmt.Errorf("device %s is listed twice", d)
		}
		seen[d] = true
	}
	if p := spec.ActiveThreadPercentage; p < 0 || p > 100 {
		return fmt.Errorf("active thread percentage %d is not within 1-100 (0: MPS's default)", p)
	}
	for d, limit := range spec.PinnedMemoryLimits {
		if !seen[d] {
			return fmt.Errorf("pinned memory limit for %s, which is not one of the daemon's devices", d)
		}
		if limit < 1<<20 {
			return fmt.Errorf("pinned memory limit %d bytes for %s is under 1 MiB, the smallest the control program takes", limit, d)
		}
	}
	return nil
}

// validID accepts ids that are safe as one path component and in an
// environment variable: claim UIDs and the like.
func validID(id string) error {
	if id == "" || id == "." || id == ".." || len(id) > 128 {
		return fmt.Errorf("daemon id %q is not valid", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("daemon id %q is not valid: only letters, digits, '-', '_' and '.'", id)
		}
	}
	return nil
}
