package localcluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/internal/mps"
)

// Down stops the processes it recorded at Up, but two kinds can run from a
// cluster's directories without a record: MPS control daemons, which the
// node agents start detached on purpose (they must outlive an agent
// restart), and a component someone restarted by hand. Left running, they
// would hold files of directories Down deletes. stopStrays finds them in
// /proc, by path, and stops them:
//
//   - an MPS daemon: TESSERA_MPS_DAEMON in its environment and its
//     CUDA_MPS_PIPE_DIRECTORY under the cluster's directory;
//   - a component: its executable is one of the cluster's binaries (BinDir,
//     the plugin's and the webhook's) and its command line names the
//     cluster's directory or one of its nodes' run directories.
//
// Nothing else is touched: a shell or `tail -f` on a log has another
// executable.
func (c *Config) stopStrays(out io.Writer, nodes []Node) []error {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return []error{err}
	}
	roots := []string{dir + string(filepath.Separator)}
	for _, n := range nodes {
		roots = append(roots, c.RunDir(n.Name)+string(filepath.Separator))
	}
	bins := map[string]bool{}
	for _, b := range []string{c.PluginBin, c.WebhookBin} {
		if b != "" {
			bins[filepath.Dir(b)] = true
		}
	}
	if c.BinDir != "" {
		bins[c.BinDir] = true
	}
	all, err := pids()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, pid := range all {
		if pid == os.Getpid() {
			continue
		}
		what := stray(pid, roots, bins)
		if what == "" {
			continue
		}
		fmt.Fprintf(out, "stopping %s (pid %d), not started by this cluster's record\n", what, pid)
		if err := stopPid(pid, 10*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("%s (pid %d): %w", what, pid, err))
		}
	}
	return errs
}

// stray says what process pid is if it runs from the cluster ("" if not).
func stray(pid int, roots []string, bins map[string]bool) string {
	base := filepath.Join("/proc", strconv.Itoa(pid))
	under := func(s string) bool {
		for _, r := range roots {
			if strings.HasPrefix(s, r) || s+string(filepath.Separator) == r {
				return true
			}
		}
		return false
	}
	if env, err := os.ReadFile(filepath.Join(base, "environ")); err == nil {
		id, pipe := "", ""
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, _ := strings.Cut(string(kv), "=")
			switch k {
			case mps.EnvDaemonID:
				id = v
			case "CUDA_MPS_PIPE_DIRECTORY":
				pipe = v
			}
		}
		if id != "" && under(pipe) {
			return "MPS daemon " + id
		}
	}
	exe := procExe(pid)
	if exe == "" || !bins[filepath.Dir(exe)] {
		return ""
	}
	cmdline, err := os.ReadFile(filepath.Join(base, "cmdline"))
	if err != nil {
		return ""
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		a := string(arg)
		if i := strings.IndexByte(a, '='); i >= 0 && strings.HasPrefix(a, "-") {
			a = a[i+1:]
		}
		if under(a) {
			return filepath.Base(exe)
		}
	}
	return ""
}

// stopPid asks pid to stop, then kills it.
func stopPid(pid int, grace time.Duration) error {
	gone := func() bool { return syscall.Kill(pid, 0) != nil || zombie(pid) }
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil // already gone
	}
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if gone() {
			return nil
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 100 {
		if gone() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("did not stop")
}
