package mps

import (
	"fmt"
	"syscall"
	"time"
)

// KillAll SIGKILLs every daemon of root, with its process group, as a
// power cut would, and waits until they are gone; it returns their PIDs.
// It is for simulated reboots (tessera-sim reboot): on a real node the
// reboot itself does this.
func KillAll(root string) ([]int, error) {
	procs, err := scan(root)
	if err != nil {
		return nil, fmt.Errorf("mps: kill daemons of %s: %w", root, err)
	}
	var pids []int
	for _, p := range procs {
		// The daemon leads its session and group (launch), so the group
		// holds any server it spawned.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		pids = append(pids, p.pid)
	}
	deadline := time.Now().Add(DefaultTimeout)
	for _, p := range procs {
		for alive(p.pid, p.start) {
			if time.Now().After(deadline) {
				return pids, fmt.Errorf("mps: daemon %s (pid %d) survived SIGKILL", p.id, p.pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return pids, nil
}
