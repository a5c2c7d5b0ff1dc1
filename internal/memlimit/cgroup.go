package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// procCgroup returns the cgroup of pid relative to the hierarchy's root
// ("/kubepods.slice/.../cri-containerd-ID.scope"), from procRoot/<pid>/cgroup:
// the unified line ("0::/path"). Where there is none (a cgroup v1 host,
// which only a simulated root may be), the memory controller's path, which
// is as much the container's as the unified one would be.
func procCgroup(procRoot string, pid int, simulated bool) (string, error) {
	f, err := os.Open(filepath.Join(procRoot, fmt.Sprint(pid), "cgroup"))
	if err != nil {
		return "", fmt.Errorf("the container's cgroup: %w", err)
	}
	defer f.Close()
	var unified, memory string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path; the path may hold ':'.
		fields := strings.SplitN(sc.Text(), ":", 3)
		if len(fields) != 3 {
			continue
		}
		switch {
		case fields[0] == "0" && fields[1] == "":
			unified = fields[2]
		case slices.Contains(strings.Split(fields[1], ","), "memory"):
			memory = fields[2]
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("the container's cgroup: %w", err)
	}
	cg := unified
	if cg == "" && simulated {
		cg = memory
	}
	if cg == "" || !path.IsAbs(cg) {
		return "", fmt.Errorf("process %d is in no cgroup v2 hierarchy (cgroup v1 node?)", pid)
	}
	cg = path.Clean(cg)
	if cg == "/" {
		return "", fmt.Errorf("process %d is in the root cgroup: the runtime made it none of its own", pid)
	}
	return cg, nil
}

// dir is cg's directory under root, once cg is known to name one strictly
// below it: a clean absolute path, not the root, no "..". A cgroup path
// comes from the kernel (procCgroup) or from a record in the state
// directory, which the hook trusts no more than anything else it reads
// back: a record naming "/../../etc" must not have its dmem.max written,
// nor (simulated) its directory removed.
func dir(root, cg string) (string, error) {
	if err := checkCgroup(cg); err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(cg)), nil
}

// checkCgroup reports whether cg is a cgroup path below the hierarchy's
// root, as procCgroup returns them.
func checkCgroup(cg string) error {
	if cg == "" || !path.IsAbs(cg) || path.Clean(cg) != cg || cg == "/" || strings.ContainsAny(cg, "\x00\n") {
		return fmt.Errorf("cgroup %q is not a clean absolute path below the cgroup root", cg)
	}
	return nil
}

// enableDmem turns the dmem controller on in the subtree_control of every
// ancestor of cg below root (the root's included), so that cg has dmem
// files: the kernel gives a cgroup a controller's files only where its
// parent delegates it. Those the runtime or systemd already set are left.
func enableDmem(root, cg string) error {
	d := root
	for _, part := range strings.Split(strings.Trim(cg, "/"), "/") {
		ctl := filepath.Join(d, "cgroup.subtree_control")
		b, err := os.ReadFile(ctl)
		if err != nil {
			return fmt.Errorf("enable dmem for %s: %w", cg, err)
		}
		if !slices.Contains(strings.Fields(string(b)), "dmem") {
			if err := writeExisting(ctl, "+dmem"); err != nil {
				return fmt.Errorf("enable dmem for %s: %w", cg, err)
			}
		}
		d = filepath.Join(d, part)
	}
	return nil
}

// writeExisting writes an interface file of the kernel's, which must be
// there: creating one would only hide that the kernel has none.
func writeExisting(f, content string) error {
	fd, err := os.OpenFile(f, os.O_WRONLY|os.O_TRUNC, 0) // as a shell's redirection: cgroupfs takes it
	if err != nil {
		return err
	}
	_, err = fd.WriteString(content)
	return errors.Join(err, fd.Close())
}

// writeDmemMax sets region's line of the cgroup's dmem.max to value
// (bytes, or "max" to lift it). The kernel keeps the other regions' lines.
func writeDmemMax(cgDir, region, value string) error {
	f := filepath.Join(cgDir, "dmem.max")
	if err := writeExisting(f, region+" "+value+"\n"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s does not exist: the dmem controller is not enabled for the cgroup", f)
		}
		return fmt.Errorf("write %s: %w", f, err)
	}
	return nil
}

// simulatedDmemMax writes the simulator's dmem.max as the kernel would show
// it: one line per region, region's replaced.
func simulatedDmemMax(cgDir, region, value string) error {
	f := filepath.Join(cgDir, "dmem.max")
	b, err := os.ReadFile(f)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", f, err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" && strings.Fields(l)[0] != region {
			lines = append(lines, l)
		}
	}
	lines = append(lines, region+" "+value)
	slices.Sort(lines)
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", f, err)
	}
	return nil
}

// ReadDmemMax returns the limit region has in the cgroup directory's
// dmem.max ("max" where unlimited), for tests and diagnostics.
func ReadDmemMax(cgDir, region string) (string, error) {
	b, err := os.ReadFile(filepath.Join(cgDir, "dmem.max"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == region {
			return f[1], nil
		}
	}
	return "max", nil
}
