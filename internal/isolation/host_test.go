package isolation

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/memlimit"
)

func TestReadHost(t *testing.T) {
	for _, tc := range []struct {
		root string
		want Host
		err  string
	}{
		{"testdata/v2-dmem", Host{Root: "testdata/v2-dmem", CgroupV2: true, Dmem: true, Regions: map[string]int64{
			"drm/0000:03:00.0/vram0": 206141652992, "nvidia/0000:18:00.0/vidmem": 85520809984}}, ""},
		{"testdata/v2-plain", Host{Root: "testdata/v2-plain", CgroupV2: true}, ""},
		{"testdata/v1", Host{Root: "testdata/v1"}, ""},
		{"testdata/missing", Host{Root: "testdata/missing"}, ""},
		{"testdata/bad-capacity", Host{}, `dmem.capacity:1: region drm/0000:03:00.0/vram0: size "lots" is not a byte count`},
	} {
		got, err := ReadHost(tc.root)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.root, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.root, got, err, tc.want)
		}
	}
}

// TestFindHook: the hook counts as installed only as an executable file
// that runs (its check exits 0).
func TestFindHook(t *testing.T) {
	d := t.TempDir()
	exe, plain, broken := filepath.Join(d, "tessera-cdi-hook"), filepath.Join(d, "plain"), filepath.Join(d, "broken")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n[ \"$1\" = check ]\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Executable, but it cannot run (its interpreter is missing), as a
	// hook on a noexec mount or built for another libc.
	if err := os.WriteFile(broken, []byte("#!/nonexistent/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path      string
		installed bool
		err       bool
	}{
		{exe, true, false}, {broken, false, true}, {plain, false, true}, {filepath.Join(d, "missing"), false, true}, {d, false, true}, {"", false, false},
	} {
		var h Host
		err := h.FindHook(memlimit.Hook{Path: tc.path})
		if h.HookInstalled != tc.installed || (err != nil) != tc.err || h.Hook.Path != tc.path {
			t.Errorf("FindHook(%q): installed %v, error %v; want %v, error %v", tc.path, h.HookInstalled, err, tc.installed, tc.err)
		}
	}
}
