// Command pause is the sandbox (pause) image's program on the local
// cluster's containerd nodes: it holds the pod's namespaces until it is told
// to stop. As the pod's PID 1 it also reaps orphans handed to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	reap := make(chan os.Signal, 1)
	signal.Notify(reap, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-reap:
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
