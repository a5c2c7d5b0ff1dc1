package localcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroupDirs is parent in every hierarchy that has it: the unified one
// (cgroup v2) or each v1 controller's.
func cgroupDirs(parent string) []string {
	var out []string
	if st, err := os.Stat(filepath.Join(cgroupRoot, parent)); err == nil && st.IsDir() {
		out = append(out, filepath.Join(cgroupRoot, parent))
	}
	entries, _ := os.ReadDir(cgroupRoot)
	for _, e := range entries {
		p := filepath.Join(cgroupRoot, e.Name(), parent)
		if st, err := os.Stat(p); err == nil && st.IsDir() && e.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

// makeCgroupDirs makes parent in every hierarchy mounted under the cgroup
// root: the kubelet requires its cgroup root in each before it starts.
func makeCgroupDirs(parent string) error {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return os.MkdirAll(filepath.Join(cgroupRoot, parent), 0o755) // cgroup v2 alone
	}
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := os.MkdirAll(filepath.Join(cgroupRoot, e.Name(), parent), 0o755); err != nil {
			return fmt.Errorf("cgroup %s in %s: %w", parent, e.Name(), err)
		}
	}
	return nil
}

// removeCgroupTree removes dir and its children, deepest first (a cgroup
// directory is removed with rmdir, and only once empty of children).
func removeCgroupTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
