package imex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Host is a node's IMEX as the agent reaches it: the kernel's files for
// the channels, and the control program for the daemon, which runs on the
// node as a service of its own (NVIDIA's nvidia-imex.service, or the
// simulator's stand-in).
type Host struct {
	// ProcRoot is the node's /proc: the kernel's own, or the simulator's
	// tree.
	ProcRoot string
	// Ctl is the control program and its leading arguments
	// (`nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg`); Status appends
	// -q.
	Ctl []string
	// Root, when set, is the driver's root the program runs in (chroot),
	// Ctl[0] a path inside it.
	Root string
	// Env, when set, is the program's environment (a driver root's
	// LD_LIBRARY_PATH where it runs outside the root).
	Env []string
	// Timeout bounds one query (5s when zero): a daemon that does not
	// answer is not ready.
	Timeout time.Duration
}

// CtlProgram is NVIDIA's IMEX control program; with -c
// DefaultConfigFile it finds the daemon the host runs (NVIDIA IMEX guide).
const CtlProgram = "nvidia-imex-ctl"

// Channels reads the channel region's major from /proc/devices and the
// driver's channel count from /proc/driver/nvidia/params.
func (h Host) Channels() (uint32, int, error) {
	devices, err := os.ReadFile(filepath.Join(h.ProcRoot, "devices"))
	if err != nil {
		return 0, 0, fmt.Errorf("IMEX channels: %w", err)
	}
	major, err := ChannelsMajor(devices)
	if err != nil {
		return 0, 0, err
	}
	params, err := os.ReadFile(filepath.Join(h.ProcRoot, "driver", "nvidia", "params"))
	if errors.Is(err, os.ErrNotExist) {
		params = nil // an older driver: the default count
	} else if err != nil {
		return 0, 0, fmt.Errorf("IMEX channels: %w", err)
	}
	count, err := ChannelCount(params)
	return major, count, err
}

// Status asks the daemon whether it is ready (`<ctl> -q`). A program that
// fails or does not answer in time is an error naming it and what it
// said; a daemon that answers anything but READY is not ready, with its
// answer as the status.
func (h Host) Status(ctx context.Context) (bool, string, error) {
	if len(h.Ctl) == 0 {
		return false, "", errors.New("no IMEX control program")
	}
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Ctl[0], append(h.Ctl[1:len(h.Ctl):len(h.Ctl)], "-q")...)
	if h.Env != nil {
		cmd.Env = h.Env
	}
	if h.Root != "" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: h.Root}
		cmd.Dir = "/"
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String() + " " + out.String())
		return false, "", fmt.Errorf("%s -q: %w: %s", strings.Join(h.Ctl, " "), err, msg)
	}
	ready, status := ParseQuery(out.Bytes())
	return ready, status, nil
}
