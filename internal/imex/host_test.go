package imex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeProc(t *testing.T, root, devices, params string) {
	t.Helper()
	for p, c := range map[string]string{"devices": devices, "driver/nvidia/params": params} {
		if c == "" {
			continue
		}
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHostChannels: the region's major and the count come from the node's
// /proc; a driver without the region is ErrNoChannels; no params file is
// the default count.
func TestHostChannels(t *testing.T) {
	const devices = "Character devices:\n  1 mem\n195 nvidia\n234 nvidia-caps-imex-channels\n\nBlock devices:\n  8 sd\n"
	root := t.TempDir()
	writeProc(t, root, devices, "ResmanDebugLevel: 4294967295\nImexChannelCount: 4096\n")
	if major, count, err := (Host{ProcRoot: root}).Channels(); err != nil || major != 234 || count != 4096 {
		t.Errorf("Channels = %d, %d, %v", major, count, err)
	}
	old := t.TempDir()
	writeProc(t, old, devices, "")
	if _, count, err := (Host{ProcRoot: old}).Channels(); err != nil || count != DefaultChannelCount {
		t.Errorf("no params file: %d, %v", count, err)
	}
	none := t.TempDir()
	writeProc(t, none, "Character devices:\n195 nvidia\n", "")
	if _, _, err := (Host{ProcRoot: none}).Channels(); !errors.Is(err, ErrNoChannels) {
		t.Errorf("no region: %v", err)
	}
}

// TestHostStatus: the control program's answer, READY or not, and its
// failure, which names the program.
func TestHostStatus(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	script := func(name, body string) []string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{p, "-c", "/etc/nvidia-imex/config.cfg"}
	}
	for _, tc := range []struct {
		name, body string
		ready      bool
		status     string
		err        string
	}{
		{"ready", `[ "$3" = -q ] && echo READY`, true, "READY", ""},
		{"not ready", `echo "NOT_READY: waiting for 10.0.0.3"`, false, "NOT_READY: waiting for 10.0.0.3", ""},
		{"no daemon", `echo "no IMEX daemon answers" >&2; exit 1`, false, "", "no IMEX daemon answers"},
	} {
		ready, status, err := (Host{Ctl: script(tc.name, tc.body)}).Status(ctx)
		if ready != tc.ready || status != tc.status || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, %q, %v", tc.name, ready, status, err)
		}
	}
	if _, _, err := (Host{}).Status(ctx); err == nil {
		t.Error("no control program: no error")
	}
}
