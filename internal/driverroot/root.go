package driverroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Marker begins every NotFoundError's message.
const Marker = "driverroot:"

// Names of the driver's files the agent needs.
const (
	NVML       = "libnvidia-ml.so.1"
	MPSControl = "nvidia-cuda-mps-control"
)

// LibraryDirs are where a driver root holds its libraries, relative to the
// root, in the order they are tried: the distributions' multiarch and lib64
// layouts (NVIDIA's DRA driver looks in the same places).
var LibraryDirs = []string{
	"usr/lib64",
	"usr/lib/x86_64-linux-gnu",
	"usr/lib/aarch64-linux-gnu",
	"lib64",
	"lib/x86_64-linux-gnu",
	"lib/aarch64-linux-gnu",
}

// BinaryDirs are where a driver root holds its programs, relative to the
// root, in the order they are tried.
var BinaryDirs = []string{
	"usr/bin",
	"usr/sbin",
	"bin",
	"sbin",
	"opt/bin",
}

// Root is a driver root.
type Root struct {
	// Host is the root's path on the node ("/", "/run/nvidia/driver"):
	// what a pod mounts it from.
	Host string
	// Mount is where the agent sees it, and where the MPS daemon pods mount
	// it ("/driver-root"); the host path when the agent runs on the host.
	Mount string
}

// New checks host and mount (absolute, clean) and returns their root; an
// empty mount is the host path.
func New(host, mount string) (Root, error) {
	if mount == "" {
		mount = host
	}
	for _, p := range []struct{ what, v string }{{"host path", host}, {"mount", mount}} {
		if !filepath.IsAbs(p.v) || filepath.Clean(p.v) != p.v {
			return Root{}, fmt.Errorf("driverroot: %s %q is not a clean absolute path", p.what, p.v)
		}
	}
	return Root{Host: host, Mount: mount}, nil
}

// Candidates are the paths, as the agent sees them, where name is looked
// for in dirs, in order.
func (r Root) Candidates(dirs []string, name string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, path.Join(r.Mount, d, name))
	}
	return out
}

// NotFoundError says that a file is in none of the places tried.
type NotFoundError struct {
	Name  string
	Root  Root
	Tried []string
	// Errs are the reasons of candidates that exist but cannot be used.
	Errs []error
}

func (e *NotFoundError) Error() string {
	where := e.Root.Host
	if e.Root.Mount != e.Root.Host {
		where += " (mounted at " + e.Root.Mount + ")"
	}
	tried := strings.Join(e.Tried, ", ")
	if err := errors.Join(e.Errs...); err != nil {
		tried += "; " + strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	// One line that ends with the parenthesis of the paths tried, so that
	// a reader of the agent's last words (kubectl tessera doctor) can cut
	// it out of a longer error.
	return fmt.Sprintf("%s %s not found under the driver root %s (tried %s)", Marker, e.Name, where, tried)
}

// Library is the path of library name (e.g. NVML) in the first of
// LibraryDirs that holds it as a regular file or a link to one, its links
// resolved inside the root (a driver's libnvidia-ml.so.1 is a link, and an
// absolute one would otherwise name the container's file system), and the
// directory it was found in: one of LibraryDirs under the mount, what the
// MPS daemons' LD_LIBRARY_PATH holds.
func (r Root) Library(name string) (path, dir string, err error) {
	c, err := r.find(LibraryDirs, name, 0)
	if err != nil {
		return "", "", err
	}
	p, err := r.resolve(c)
	if err != nil {
		return "", "", fmt.Errorf("driverroot: %s: %w", c, err)
	}
	return p, filepath.Dir(c), nil
}

// Binary is the path of program name (e.g. MPSControl) in the first of
// BinaryDirs that holds it as an executable file or a link to one. The
// path is the candidate's, not its link's target: the daemon pods' admission
// policy admits only the candidates.
func (r Root) Binary(name string) (string, error) {
	return r.find(BinaryDirs, name, 0o111)
}

// find is the first candidate of name in dirs that resolves, inside the
// root, to a regular file with one of the mode bits in exec (none: any
// file). Links are followed as the root's own: an absolute target is
// relative to the root, as it is on the host.
func (r Root) find(dirs []string, name string, exec fs.FileMode) (string, error) {
	nf := &NotFoundError{Name: name, Root: r}
	for _, c := range r.Candidates(dirs, name) {
		nf.Tried = append(nf.Tried, c)
		target, err := r.resolve(c)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			nf.Errs = append(nf.Errs, fmt.Errorf("%s: %w", c, err))
			continue
		}
		fi, err := os.Stat(target)
		if err != nil {
			nf.Errs = append(nf.Errs, fmt.Errorf("%s: %w", c, err))
			continue
		}
		if !fi.Mode().IsRegular() || (exec != 0 && fi.Mode().Perm()&exec == 0) {
			nf.Errs = append(nf.Errs, fmt.Errorf("%s: not an executable regular file (mode %v)", c, fi.Mode()))
			if exec == 0 {
				nf.Errs[len(nf.Errs)-1] = fmt.Errorf("%s: not a regular file (mode %v)", c, fi.Mode())
			}
			continue
		}
		return c, nil
	}
	return "", nf
}

// maxLinks bounds the links followed for one path, as the kernel does.
const maxLinks = 40

// resolve follows the links of p (a path under the mount) component by
// component with the mount as /, and returns the file's path under the
// mount. A link may not lead out of the root.
func (r Root) resolve(p string) (string, error) {
	rel, err := filepath.Rel(r.Mount, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not under %s", p, r.Mount)
	}
	todo := strings.Split(rel, "/")
	done := "/"
	for links := 0; len(todo) > 0; {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, part)
		full := filepath.Join(r.Mount, next)
		fi, err := os.Lstat(full)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many links", p)
		}
		target, err := os.Readlink(full)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return filepath.Join(r.Mount, done), nil
}
