package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/internal/fsutil"
	"golang.org/x/sys/unix"
)

// kubeletSysctls are the sysctls a kubelet sets at start (docs/design.md); Up
// saves them and Down puts them back.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

var (
	// procSys is where the sysctls are (tests point it elsewhere).
	procSys = "/proc/sys"
	// sysctlSaveFile holds the host's values from before the first kubelet
	// changed them, machine-wide and on tmpfs: a harness killed before
	// Down leaves it, so the next Up takes the host's values from it
	// instead of the kubelets' (which it would otherwise "restore"), and a
	// reboot, which resets the sysctls, takes it too. Down removes it once
	// the values are back.
	sysctlSaveFile = "/run/tessera-localcluster/sysctls.json"
)

func readSysctls() map[string]string {
	out := map[string]string{}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile(filepath.Join(procSys, k)); err == nil {
			out[k] = strings.TrimSpace(string(v))
		}
	}
	return out
}

// saveSysctls returns the host's values of the kubelet sysctls: those
// sysctlSaveFile kept, when an earlier cluster's Down never ran, else the
// current ones, which it keeps there first.
func saveSysctls() (map[string]string, error) {
	var saved map[string]string
	if found, err := fsutil.ReadJSON(sysctlSaveFile, &saved); err == nil && found && len(saved) > 0 {
		return saved, nil
	}
	saved = readSysctls()
	if err := os.MkdirAll(filepath.Dir(sysctlSaveFile), 0o755); err != nil {
		return nil, fmt.Errorf("save sysctls: %w", err)
	}
	if err := fsutil.WriteJSON(sysctlSaveFile, saved, true, 0o644); err != nil {
		return nil, fmt.Errorf("save sysctls: %w", err)
	}
	return saved, nil
}

// restoreSysctls puts saved back and, once all are back, forgets the
// machine-wide copy.
func restoreSysctls(saved map[string]string) []error {
	var errs []error
	for k, v := range saved {
		cur, err := os.ReadFile(filepath.Join(procSys, k))
		if err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(filepath.Join(procSys, k), []byte(v), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && len(saved) > 0 {
		if err := os.Remove(sysctlSaveFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errs
}

// mountsUnder lists mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline, backslash.
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func unmountAll(dir string) []error {
	var errs []error
	// Repeat: a bind mount may be stacked on itself.
	for i := 0; i < 5; i++ {
		mps, err := mountsUnder(dir)
		if err != nil {
			return append(errs, err)
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
				errs = append(errs, err)
			}
		}
	}
	return errs
}
