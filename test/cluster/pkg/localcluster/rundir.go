package localcluster

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
)

// maxSocketPath is the longest path a unix socket can bind to on Linux
// (sun_path is 108 bytes with its terminating NUL).
const maxSocketPath = 107

// longestSocket is the longest socket name a node creates below its run
// dir: the kubelet plugin registrar's socket for our driver.
var longestSocket = filepath.Join("kubelet", "plugins_registry", "gpu.tessera.dev-reg.sock")

// RunDir is a node's short directory for everything that holds a unix
// socket: the kubelet root (plugin registry, plugin sockets, the driver's
// checkpoint) and the fake runtime's CRI socket. Socket paths are limited to
// 107 bytes, and a checkout path plus a node name easily passes that, so
// these live in the temp dir under a name derived from the node's directory
// (stable per cluster and node, distinct between clusters). NodeDir/kubelet
// links to it for browsing; Down removes it.
func (c *Config) RunDir(node string) string {
	h := fnv.New32a()
	h.Write([]byte(c.NodeDir(node)))
	return filepath.Join(os.TempDir(), fmt.Sprintf("tessera-%08x", h.Sum32()))
}

// makeRunDir creates a node's run dir afresh and links it from the node dir.
func (c *Config) makeRunDir(node string) error {
	dir := c.RunDir(node)
	if p := filepath.Join(dir, longestSocket); len(p) > maxSocketPath {
		return fmt.Errorf("socket path %s is %d bytes, over the %d a unix socket allows: set TMPDIR to a shorter directory", p, len(p), maxSocketPath)
	}
	if err := c.removeRunDir(node); err != nil {
		return err
	}
	if err := os.MkdirAll(c.KubeletRoot(node), 0o755); err != nil {
		return err
	}
	link := filepath.Join(c.NodeDir(node), "kubelet")
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Symlink(c.KubeletRoot(node), link)
}

// removeRunDir unmounts what the kubelet mounted in a node's run dir and
// removes it.
func (c *Config) removeRunDir(node string) error {
	dir := c.RunDir(node)
	if errs := unmountAll(dir); len(errs) > 0 {
		return fmt.Errorf("unmount under %s: %v", dir, errs)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove node %s run dir: %w", node, err)
	}
	return nil
}
