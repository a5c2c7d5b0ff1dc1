package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Every kubelet of the local cluster serves its device plugin registration
// socket at the same path: the kubelet fixes it at
// /var/lib/kubelet/device-plugins/kubelet.sock whatever its --root-dir. At
// start each one removes the directory's sockets, then listens there; two
// kubelets starting at once can interleave those steps, and the second
// fails its container manager ("bind: address already in use") and exits.
// So a kubelet is started only once the one before it has its socket:
// startKubelet waits for that line of its log.
const (
	kubeletDevicePluginsUp     = "Starting device plugin registration server"
	kubeletContainerManagerErr = "Failed to start ContainerManager"
)

// kubeletStartTimeout bounds the wait for a kubelet's device plugin socket.
const kubeletStartTimeout = 60 * time.Second

// startKubelet starts a kubelet (name, bin, args as start takes them) and
// returns once it serves its device plugin socket.
func (c *Config) startKubelet(s *State, name, bin string, args ...string) error {
	logPath := filepath.Join(c.LogDir(), name+".log")
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size() // the log is appended to across restarts
	}
	p, err := c.start(s, name, bin, args...)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(kubeletStartTimeout)
	for {
		log := readFrom(logPath, offset)
		switch {
		case strings.Contains(log, kubeletDevicePluginsUp):
			return nil
		case strings.Contains(log, kubeletContainerManagerErr):
			return fmt.Errorf("%s did not start its container manager:\n%s", name, tail(logPath, 20))
		case !alive(*p):
			return fmt.Errorf("%s exited:\n%s", name, tail(logPath, 20))
		case time.Now().After(deadline):
			return fmt.Errorf("%s: no %q in its log after %s:\n%s", name, kubeletDevicePluginsUp, kubeletStartTimeout, tail(logPath, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readFrom is the file's content from offset on ("" if unreadable).
func readFrom(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < offset {
		return ""
	}
	return string(data[offset:])
}
