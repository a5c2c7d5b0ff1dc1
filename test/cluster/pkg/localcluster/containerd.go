package localcluster

import (
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A containerd node (RuntimeContainerd) runs its own containerd: its own
// socket, state and root, its own CNI bridge and subnet. Several share one
// kernel, so nothing of theirs may be at a fixed host path: its kubelet
// keeps its pods' cgroups under a cgroup root of its own (KubeletCgroupRoot),
// each pod's in a cgroup of the pod, as on a real node.

// ContainerdSocket is a node's containerd socket (in its short RunDir).
func (c *Config) ContainerdSocket(node string) string {
	return filepath.Join(c.RunDir(node), "containerd.sock")
}

func (c *Config) containerdDir(node string) string {
	return filepath.Join(c.NodeDir(node), "containerd")
}

// nodeHash: 32 bits that tell this cluster's node apart from others on the
// machine (the RunDir's hash), for names that must be unique host-wide.
func (c *Config) nodeHash(node string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(c.NodeDir(node)))
	return h.Sum32()
}

// KubeletCgroupRoot is where a containerd node's kubelet makes its pods'
// cgroups (kubepods/<qos>/pod<uid>/<container>): unique on the machine.
func (c *Config) KubeletCgroupRoot(node string) string {
	return fmt.Sprintf("/tessera-%08x", c.nodeHash(node))
}

// bridge is the node's CNI bridge (at most 15 characters).
func (c *Config) bridge(node string) string { return fmt.Sprintf("tsr%08x", c.nodeHash(node)) }

// podSubnet is the node's pod subnet, 10.200.0.0/24 to 10.249.255.0/24 by
// the node's hash: distinct between the nodes of one cluster (checked by
// checkNetworks) and, almost always, between clusters.
func (c *Config) podSubnet(node string) string {
	h := c.nodeHash(node)
	return fmt.Sprintf("10.%d.%d.0/24", 200+h%50, (h>>8)%256)
}

func (c *Config) containerdConfig(node string) string {
	d := c.containerdDir(node)
	return fmt.Sprintf(`version = 3
root = %q
state = %q
# Plugins this machine cannot use, or that would listen at fixed host paths
# shared by every node (NRI's socket).
disabled_plugins = [
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.erofs',
  'io.containerd.nri.v1.nri',
]
imports = []

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %q
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %q
  [plugins.'io.containerd.cri.v1.runtime']
    # The agent writes one CDI spec per claim here (the chart's cdi.dir).
    cdi_spec_dirs = [%q]
    # Pod network namespaces under the state dir, not /var/run/netns.
    netns_mounts_under_state_dir = true
    # Keep containers' oom_score_adj at or above containerd's own: the
    # kubelet asks -998 for sandboxes and critical pods, and lowering it
    # needs CAP_SYS_RESOURCE, which a sandboxed machine may not grant.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      runtime_path = %q
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%q]
      conf_dir = %q
`, filepath.Join(d, "root"), filepath.Join(c.RunDir(node), "containerd"),
		c.ContainerdSocket(node), c.ContainerdSocket(node)+".ttrpc",
		filepath.Join(d, "opt"), PauseImage, c.CDIDir(node),
		c.bin("containerd-shim-runc-v2"), c.bin("runc"),
		filepath.Join(c.BinDir, "cni"), filepath.Join(d, "cni"))
}

// cniConfig: a bridge of the node's own with host-local addresses (kept
// under the node's directory). The kubelet reaches pods through it (probes);
// pods need no way out. No portmap: it needs iptables and no pod here asks
// for a host port.
func (c *Config) cniConfig(node string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "tessera-%08x",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q}]],
      "dataDir": %q
    }
  }]
}
`, c.nodeHash(node), c.bridge(node), c.podSubnet(node), filepath.Join(c.containerdDir(node), "cni-ipam"))
}

// checkNetworks refuses nodes whose bridges or subnets would collide.
func (c *Config) checkNetworks() error {
	seen := map[string]string{}
	for _, n := range c.Nodes {
		for _, key := range []string{c.bridge(n.Name), c.podSubnet(n.Name)} {
			if other, ok := seen[key]; ok {
				return fmt.Errorf("nodes %s and %s would share %s: rename one", other, n.Name, key)
			}
			seen[key] = n.Name
		}
	}
	return nil
}

// startContainerd writes a node's containerd and CNI configuration, starts
// it, and imports the cluster's images.
func (c *Config) startContainerd(s *State, node string, images []image) error {
	d := c.containerdDir(node)
	if err := os.MkdirAll(filepath.Join(d, "cni"), 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(d, "config.toml")
	if err := os.WriteFile(cfg, []byte(c.containerdConfig(node)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "cni", "10-tessera.conflist"), []byte(c.cniConfig(node)), 0o644); err != nil {
		return err
	}
	if _, err := c.start(s, "containerd-"+node, c.bin("containerd"), "--config="+cfg); err != nil {
		return err
	}
	if err := waitFile(c.ContainerdSocket(node), 20*time.Second); err != nil {
		return fmt.Errorf("containerd socket: %w\n%s", err, tail(filepath.Join(c.LogDir(), "containerd-"+node+".log"), 20))
	}
	for _, im := range images {
		if err := c.importImage(node, im); err != nil {
			return err
		}
	}
	return nil
}

// stopContainers kills what runs in a node's containers: they outlive
// containerd and their shims by design. Each container's (and sandbox's)
// first process is a child of its shim and PID 1 of its own PID namespace,
// so killing it makes the kernel kill the rest of that namespace (the
// agent's MPS daemons with the agent). The shims go with the strays.
// runc never deletes these containers, so their cgroups are removed here,
// by the container IDs in containerd's state, and the node's bridge.
func (c *Config) stopContainers(node string) []error {
	var errs []error
	shims := c.shims(node)
	for try := 0; ; try++ {
		left := 0
		for _, pid := range childrenOf(shims) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			left++
		}
		if left == 0 {
			break
		}
		if try == 100 {
			errs = append(errs, fmt.Errorf("node %s: container processes survive SIGKILL", node))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	tasks, _ := os.ReadDir(filepath.Join(c.RunDir(node), "containerd", "io.containerd.runtime.v2.task", "k8s.io"))
	for _, task := range tasks {
		// containerd's CRI puts a container without a cgroup parent from
		// the kubelet under its namespace's name.
		for _, d := range cgroupDirs(filepath.Join("/k8s.io", task.Name())) {
			if err := removeCgroupTree(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// The parent too, once no cluster's containers are left in it.
	for _, d := range cgroupDirs("/k8s.io") {
		_ = syscall.Rmdir(d)
	}
	// The kubelet's pods, once their processes are gone.
	for _, d := range cgroupDirs(c.KubeletCgroupRoot(node)) {
		if err := removeCgroupTree(d); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", c.bridge(node))); err == nil {
		if out, err := exec.Command("ip", "link", "delete", c.bridge(node)).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", c.bridge(node), err, strings.TrimSpace(string(out))))
		}
	}
	return errs
}

// shims are the pids of the node's containerd shims: the shim binary,
// started with the node's containerd socket as its -address.
func (c *Config) shims(node string) map[int]bool {
	out := map[int]bool{}
	all, _ := pids() // none found: nothing to stop
	for _, pid := range all {
		if procExe(pid) != c.bin("containerd-shim-runc-v2") {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == c.ContainerdSocket(node) {
				out[pid] = true
			}
		}
	}
	return out
}

// childrenOf lists the live (not zombie) processes whose parent is one of
// parents.
func childrenOf(parents map[int]bool) []int {
	if len(parents) == 0 {
		return nil
	}
	var out []int
	all, _ := pids()
	for _, pid := range all {
		if state, ppid, err := procStat(pid); err == nil && state != "Z" && parents[ppid] {
			out = append(out, pid)
		}
	}
	return out
}
