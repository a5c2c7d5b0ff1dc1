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
)

// MPS control daemons are started detached by the node agents, on purpose:
// they must outlive an agent restart. So stopping the agents does not stop
// them; a cluster torn down with MPS pods still running would leave them
// behind. stopMPSDaemons kills every daemon whose pipe directory lies under
// the cluster's directory, found as the agent itself finds them: by the
// TESSERA_MPS_DAEMON variable in /proc/<pid>/environ.
func (c *Config) stopMPSDaemons(out io.Writer) []error {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return []error{err}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return []error{fmt.Errorf("list processes: %w", err)}
	}
	var errs []error
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
		if err != nil {
			continue // gone, or not ours to read
		}
		id, pipe := "", ""
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, _ := strings.Cut(string(kv), "=")
			switch k {
			case "TESSERA_MPS_DAEMON":
				id = v
			case "CUDA_MPS_PIPE_DIRECTORY":
				pipe = v
			}
		}
		if id == "" || !strings.HasPrefix(pipe, dir+string(filepath.Separator)) {
			continue
		}
		fmt.Fprintf(out, "stopping MPS daemon %s (pid %d)\n", id, pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			errs = append(errs, fmt.Errorf("stop MPS daemon %s (pid %d): %w", id, pid, err))
		}
	}
	return errs
}
