// Command probe is the workload image of the local cluster's containerd
// nodes: it prints what its container was given, one fact per line, then
// waits to be stopped, so a test reads the container's log:
//
//	device /dev/nvidia0 c 195:0 ENXIO
//	env NVIDIA_VISIBLE_DEVICES=GPU-...
//	mount /var/run/... /tmp/...
//	probe: ready
//
// Devices are every character and block device under /dev, each with what
// opening it read-only gave: "ok" or the errno's name. EPERM means the
// container's device cgroup refuses it; a simulated GPU's node admitted
// by the cgroup gives ENXIO (no driver behind its numbers). Environment
// variables every one, mounts every mount point of /proc/self/mountinfo
// with its root in the source file system; each group sorted.
//
// A container given an NCCL topology file (NCCL_TOPO_FILE) prints it, each
// line prefixed "topo ", or "topo error ..." when it cannot read it.
//
// Each device metadata file the kubelet mounted (KEP-5304, under
// /var/run/kubernetes.io/dra-device-attributes) is printed, each line
// prefixed "metadata <path> ", as a workload or a VMM would read it.
//
// A container given an MPS pipe directory (CUDA_MPS_PIPE_DIRECTORY) also
// lists what it can see there ("mpsfile control"), and holds a client
// session with the daemon behind it as a CUDA process would (the MPS
// stand-in's client, internal/sim/standin): "mps connected" once it is, and if
// the daemon or its namespace goes away the probe exits 3, as a CUDA
// client of a dead MPS server fails, so its container restarts and a test
// sees it.
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/internal/sim/standin"
)

func main() {
	for _, l := range devices("/dev") {
		fmt.Println(l)
	}
	env := os.Environ()
	sort.Strings(env)
	for _, e := range env {
		fmt.Println("env " + e)
	}
	for _, l := range mounts("/proc/self/mountinfo") {
		fmt.Println(l)
	}
	if topo := os.Getenv("NCCL_TOPO_FILE"); topo != "" {
		for _, l := range fileLines("topo", topo) {
			fmt.Println(l)
		}
	}
	for _, l := range metadataFiles(metadataRoot) {
		fmt.Println(l)
	}
	if pipe := os.Getenv("CUDA_MPS_PIPE_DIRECTORY"); pipe != "" {
		for _, l := range mpsFiles(pipe) {
			fmt.Println(l)
		}
		go mpsSession()
	}
	fmt.Println("probe: ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}

// mpsFiles lists the pipe directory's tree, relative to it.
func mpsFiles(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, "mpsfile "+rel)
		return nil
	})
	sort.Strings(out)
	return out
}

// mpsSession runs the stand-in's client session until it ends, its lines
// prefixed "mps ", and exits 3 when it ends in failure.
func mpsSession() {
	code := standin.Main([]string{"client", "--hold"}, strings.NewReader(""), prefixed{"mps "}, prefixed{"mps "})
	fmt.Printf("mps: session ended with status %d\n", code)
	if code != 0 {
		os.Exit(3)
	}
}

// prefixed writes each write as a line of stdout with a prefix.
type prefixed struct{ prefix string }

func (w prefixed) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Println(w.prefix + l)
	}
	return len(b), nil
}

func devices(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // e.g. a directory this container may not read
		}
		if d.Type()&(fs.ModeDevice|fs.ModeCharDevice) == 0 {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		kind := "b"
		if d.Type()&fs.ModeCharDevice != 0 {
			kind = "c"
		}
		out = append(out, fmt.Sprintf("device %s %s %d:%d %s", p, kind, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), tryOpen(p)))
		return nil
	})
	sort.Strings(out)
	return out
}

// tryOpen opens a device node without blocking and says how that went.
func tryOpen(path string) string {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if errno, ok := err.(unix.Errno); ok {
			return unix.ErrnoName(errno)
		}
		return "error"
	}
	unix.Close(fd)
	return "ok"
}

// mounts reads mountinfo: field 4 is the root within the source file
// system, field 5 the mount point.
func mounts(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{"mount error " + err.Error()}
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 {
			out = append(out, "mount "+fields[4]+" "+fields[3])
		}
	}
	sort.Strings(out)
	return out
}

// fileLines is the file's lines, each prefixed, or one line saying why it
// cannot be read.
func fileLines(prefix, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{prefix + " error " + err.Error()}
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		out = append(out, prefix+" "+l)
	}
	return out
}

// metadataRoot is the kubelet's fixed directory of device metadata files
// in a container.
const metadataRoot = "/var/run/kubernetes.io/dra-device-attributes"

// metadataFiles is every metadata file under root, line by line, each
// line prefixed "metadata <path>"; nothing where root is absent (a
// container without claims).
func metadataFiles(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		out = append(out, fileLines("metadata "+p, p)...)
		return nil
	})
	return out
}
