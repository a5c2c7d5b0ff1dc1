package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/sim"
	"k8s.io/klog/v2"
)

// TestValidateIMEX: --imex-channels off by default, bounded, and needing a
// namespace for the domain's lease (the flag's or the pod's).
func TestValidateIMEX(t *testing.T) {
	for _, tc := range []struct {
		name          string
		channels      int
		ns, podNS     string
		wantNS, error string
	}{
		{name: "off", channels: 0},
		{name: "from the pod", channels: 127, podNS: "tessera-system", wantNS: "tessera-system"},
		{name: "flag over pod", channels: 127, ns: "imex", podNS: "tessera-system", wantNS: "imex"},
		{name: "no namespace", channels: 1, error: "--imex-namespace (or POD_NAMESPACE) is required"},
		{name: "negative", channels: -1, podNS: "x", error: "--imex-channels=-1"},
		{name: "beyond the driver's channels", channels: 2048, podNS: "x", error: "1 to 2047"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.podNS)
			c := Config{IMEXChannels: tc.channels, IMEXNamespace: tc.ns}
			err := c.validateIMEX()
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Errorf("error %v, want %q", err, tc.error)
				}
				return
			}
			if err != nil || c.IMEXNamespace != tc.wantNS {
				t.Errorf("%v, namespace %q; want %q", err, c.IMEXNamespace, tc.wantNS)
			}
		})
	}
}

// TestIMEXHost: with --imex-channels the agent asks the node's IMEX daemon
// through the simulator's stand-in beside it (sim), the driver root's
// control program run inside the root (nvml with a root), or the program
// on PATH; --imex-ctl overrides; without channels, nothing.
func TestIMEXHost(t *testing.T) {
	logger := klog.Background()
	dir := t.TempDir()
	executable = func() (string, error) { return filepath.Join(dir, "tessera-kubelet-plugin"), nil }
	t.Cleanup(func() { executable = os.Executable })
	m, err := sim.Profile("gb200-nvl72-tray", "tray-1")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	b, err := sim.New(m, state, sim.WithBootID("b"))
	if err != nil {
		t.Fatal(err)
	}
	c := Config{IMEXChannels: 8, SimStateDir: state}
	h, err := c.imexHost(logger, b)
	if err != nil || h.ProcRoot != b.ProcRoot() || strings.Join(h.Ctl, " ") != filepath.Join(dir, "tessera-sim")+" imex-ctl -c "+filepath.Join(state, "imex", "config.cfg") {
		t.Errorf("sim: %+v, %v", h, err)
	}
	c.IMEXCtl = "/opt/bin/imex-ctl -c /x.cfg"
	if h, _ := c.imexHost(logger, b); strings.Join(h.Ctl, " ") != c.IMEXCtl {
		t.Errorf("--imex-ctl: %+v", h)
	}

	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/nvidia-imex-ctl"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	nv := Config{IMEXChannels: 8, NvidiaDriverRoot: "/run/nvidia/driver", NvidiaDriverRootMount: root}
	h, err = nv.imexHost(logger, nil)
	if err != nil || h.Root != root || strings.Join(h.Ctl, " ") != "/usr/bin/nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg" || h.ProcRoot != "/proc" {
		t.Errorf("nvml with a driver root: %+v, %v", h, err)
	}
	if h, err := (&Config{IMEXChannels: 8}).imexHost(logger, nil); err != nil || h.Root != "" || h.Ctl[0] != "nvidia-imex-ctl" {
		t.Errorf("nvml on the host: %+v, %v", h, err)
	}
	if h, err := (&Config{}).imexHost(logger, b); h != nil || err != nil {
		t.Errorf("no channels: %+v, %v", h, err)
	}
}
