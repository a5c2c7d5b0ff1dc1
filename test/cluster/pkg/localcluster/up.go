package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Up starts the cluster and waits until every node is Ready and has
// published its ResourceSlices. Whatever a previous run left is cleaned up
// first. On failure it stops what it started and the error names the log
// directory; the logs stay.
func (c *Config) Up(ctx context.Context, out io.Writer) (err error) {
	if err := c.Down(out); err != nil {
		return fmt.Errorf("clean up previous cluster: %w", err)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\ncomponent logs: %s", err, c.LogDir())
			if derr := c.Down(io.Discard); derr != nil {
				err = fmt.Errorf("%w (and stopping the cluster: %v)", err, derr)
			}
		}
	}()
	start := time.Now()
	sysctls, err := saveSysctls()
	if err != nil {
		return err
	}
	s := &State{Ports: map[string]int{}, Nodes: c.Nodes, Sysctls: sysctls, Runtime: c.RuntimeOf()}
	if err := c.saveState(s); err != nil {
		return err
	}
	p, err := c.makePKI()
	if err != nil {
		return fmt.Errorf("generate PKI: %w", err)
	}
	// The webhook binds port 0 and holds it before the other ports are
	// chosen: those are free when chosen but held only once their
	// component starts, and the webhook's bind could take one of them.
	// It is registered once the API server runs.
	if c.RuntimeOf() != RuntimeContainerd { // there the chart runs it
		if err := c.startWebhookProcess(ctx, s); err != nil {
			return err
		}
	}
	if _, err := c.imexHosts(); err != nil {
		return err
	}
	ports, err := newPortPicker()
	if err != nil {
		return err
	}
	for _, name := range c.portNames() {
		if s.Ports[name], err = ports.pick(); err != nil {
			return err
		}
	}
	if err := c.saveState(s); err != nil {
		return err
	}
	if err := c.writeAdminKubeconfig(p, s); err != nil {
		return err
	}
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	step("etcd on 127.0.0.1:%d", s.Ports["etcd"])
	if _, err := c.startEtcd(s); err != nil {
		return err
	}
	step("kube-apiserver on https://127.0.0.1:%d", s.Ports["apiserver"])
	if _, err := c.startAPIServer(s, p); err != nil {
		return err
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	if err := waitAPIServer(ctx, client, c.procByName(s, "kube-apiserver")); err != nil {
		return err
	}
	step("metrics reader %s/%s: get on /metrics, its token in %s", MetricsReaderNamespace, MetricsReaderName, c.MetricsTokenFile())
	if err := c.grantMetricsReader(ctx, client); err != nil {
		return err
	}
	step("kube-controller-manager, kube-scheduler")
	if err := c.startControllers(s, p); err != nil {
		return err
	}
	if err := c.applyDeviceClasses(ctx, client); err != nil {
		return fmt.Errorf("apply DeviceClasses: %w", err)
	}
	if c.RuntimeOf() != RuntimeContainerd {
		if err := c.registerWebhook(ctx, s); err != nil {
			return err
		}
		step("tessera-webhook on %s, registered with the chart's webhook configuration", WebhookURL(s))
	}
	var images []image
	if c.RuntimeOf() == RuntimeContainerd {
		if err := c.checkNetworks(); err != nil {
			return err
		}
		step("images: make images' %s, %s, %s (%s), and %s, %s", AgentImage, AgentSimImage, WebhookImage, c.Images, ProbeImage, PauseImage)
		if images, err = c.clusterImages(); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if c.RuntimeOf() == RuntimeContainerd {
			step("node %s: containerd, kubelet (%s, %s partitioning, sharing %s)", n.Name, n.Profile, n.PartitioningOf(), n.SharingOf())
		} else {
			step("node %s: fake runtime, kubelet, tessera-kubelet-plugin (%s, %s partitioning, sharing %s), metrics %s", n.Name, n.Profile, n.PartitioningOf(), n.SharingOf(), MetricsURL(s, n.Name))
		}
		if err := c.startNode(s, p, n, images); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if c.RuntimeOf() == RuntimeContainerd {
		step("tessera-kubelet-plugin: the chart's DaemonSet, one release per node in namespace %s; tessera-webhook: the chart's Deployment", AgentNamespace)
		if err := c.installAgents(s); err != nil {
			return err
		}
	}
	step("waiting for nodes Ready and ResourceSlices published")
	if err := c.waitNodes(ctx, client, s); err != nil {
		return err
	}
	step("waiting for the default namespace's service account")
	if err := WaitPodsAdmitted(ctx, client, metav1.NamespaceDefault); err != nil {
		return err
	}
	step("cluster up; kubeconfig %s", c.Kubeconfig())
	return nil
}

func (c *Config) portNames() []string {
	// prometheus is kept for a Prometheus that scrapes the agents
	// (PrometheusPort); the cluster does not start one.
	names := []string{"etcd", "etcd-peer", "apiserver", "scheduler", "controller-manager", "prometheus"}
	for _, n := range c.Nodes {
		names = append(names, "kubelet-"+n.Name, "kubelet-healthz-"+n.Name, metricsPort(n.Name))
	}
	hosts, _ := c.imexHosts() // checked at Up
	for _, h := range hosts {
		if c.hostIMEX() && !slices.Contains(names, imexPort(h.domain)) {
			names = append(names, imexPort(h.domain))
		}
	}
	return names
}

func (c *Config) procByName(s *State, name string) Proc {
	for _, p := range s.Procs {
		if p.Name == name {
			return p
		}
	}
	return Proc{}
}

func (c *Config) bin(name string) string { return filepath.Join(c.BinDir, name) }

func (c *Config) pkiPath(name string) string { return filepath.Join(c.Dir, "pki", name) }

func (c *Config) makePKI() (*pki, error) {
	p, err := newPKI(c.pkiPath(""))
	if err != nil {
		return nil, err
	}
	issue := []struct {
		name, cn string
		groups   []string
		hosts    []string
	}{
		{"apiserver", "kube-apiserver", nil, []string{"127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}},
		{"admin", "tessera-admin", []string{"system:masters"}, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		// The webhook's serving certificate: the API server calls it at
		// https://127.0.0.1:<port> and trusts the cluster CA.
		{"webhook", "tessera-webhook", nil, []string{"127.0.0.1"}},
	}
	for _, n := range c.Nodes {
		issue = append(issue, struct {
			name, cn string
			groups   []string
			hosts    []string
		}{"kubelet-" + n.Name, "system:node:" + n.Name, []string{"system:nodes"}, nil})
		// The node's agent's metrics port (metricsauth.go).
		issue = append(issue, struct {
			name, cn string
			groups   []string
			hosts    []string
		}{metricsCert(n.Name), "tessera-kubelet-plugin", nil, []string{"127.0.0.1", "localhost"}})
	}
	for _, i := range issue {
		if err := p.issue(i.name, i.cn, i.groups, i.hosts); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (c *Config) server(s *State) string {
	return "https://127.0.0.1:" + strconv.Itoa(s.Ports["apiserver"])
}

func (c *Config) startEtcd(s *State) (*Proc, error) {
	return c.start(s, "etcd", c.bin("etcd"),
		"--name=local",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:"+strconv.Itoa(s.Ports["etcd"]),
		"--advertise-client-urls=http://127.0.0.1:"+strconv.Itoa(s.Ports["etcd"]),
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(s.Ports["etcd-peer"]),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(s.Ports["etcd-peer"]),
		"--initial-cluster=local=http://127.0.0.1:"+strconv.Itoa(s.Ports["etcd-peer"]),
		// Test data: durability is not worth the fsync latency here.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
}

func (c *Config) startAPIServer(s *State, p *pki) (*Proc, error) {
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(s.Ports["etcd"]),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.Ports["apiserver"]),
		"--tls-cert-file=" + p.path("apiserver.crt"),
		"--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--service-account-key-file=" + p.path("sa.pub"),
		"--service-account-signing-key-file=" + p.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24",
		// The kubernetes Service cannot point at a loopback address.
		"--endpoint-reconciler-type=none",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		// kubectl logs and exec: the API server calls the kubelets.
		"--kubelet-client-certificate=" + p.path("admin.crt"),
		"--kubelet-client-key=" + p.path("admin.key"),
		// Node names are not host names here.
		"--kubelet-preferred-address-types=InternalIP",
		// Webhooks behind a Service (the chart's, on containerd nodes)
		// are called at their pods' addresses: there is no kube-proxy.
		"--enable-aggregator-routing=true",
	}
	args = append(args, c.gateArgs(true)...)
	return c.start(s, "kube-apiserver", c.bin("kube-apiserver"), append(args, c.APIServerArgs...)...)
}

// startControllers starts kube-controller-manager and kube-scheduler, each
// with its own client certificate, on 127.0.0.1 without leader election.
func (c *Config) startControllers(s *State, p *pki) error {
	for _, comp := range []struct {
		name  string
		extra []string
	}{
		{"controller-manager", []string{
			"--service-account-private-key-file=" + p.path("sa.key"),
			"--root-ca-file=" + p.path("ca.crt"),
			"--use-service-account-credentials=true",
		}},
		{"scheduler", c.SchedulerArgs},
	} {
		kc := filepath.Join(c.Dir, comp.name+".kubeconfig")
		if err := p.writeKubeconfig(kc, c.server(s), comp.name); err != nil {
			return err
		}
		args := append([]string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(s.Ports[comp.name]),
			"--cert-dir=" + filepath.Join(c.Dir, comp.name+"-certs"),
		}, comp.extra...)
		args = append(args, c.gateArgs(false)...)
		if _, err := c.start(s, "kube-"+comp.name, c.bin("kube-"+comp.name), args...); err != nil {
			return err
		}
	}
	return nil
}

// kubeletConfig is a KubeletConfiguration for a kubelet that shares the
// host with others and runs no real containers (docs/design.md).
func (c *Config) kubeletConfig(s *State, p *pki, n Node) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
%s
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
evictionHard: {}
# Each kubelet keeps its own pod logs: with a shared /var/log/pods, one
# kubelet's log GC removes the logs of the others' pods.
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
registerNode: true
nodeStatusReportFrequency: 10s
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
serializeImagePulls: false
containerRuntimeEndpoint: unix://%s
%s`, c.kubeletAddress(), s.Ports["kubelet-"+n.Name], s.Ports["kubelet-healthz-"+n.Name], p.path("ca.crt"), c.kubeletCgroups(n), filepath.Join(c.NodeDir(n.Name), "pod-logs"), c.criSocket(n.Name), c.kubeletGates())
}

// kubeletCgroups is a kubelet's cgroup settings. A containerd node's pods
// get cgroups as on a real node, under the node's own root: a pod's cgroup
// is what the memory limit hook limits (internal/memlimit). A fake node
// runs no containers: none.
func (c *Config) kubeletCgroups(n Node) string {
	if c.RuntimeOf() != RuntimeContainerd {
		return "cgroupsPerQOS: false"
	}
	return "cgroupsPerQOS: true\ncgroupRoot: " + c.KubeletCgroupRoot(n.Name)
}

// kubeletAddress is where the kubelet serves. A containerd node's kubelet
// serves on every interface: the node's address is this machine's (the
// kubelet refuses a loopback node IP), and the API server reaches it there
// for logs and exec, as it reaches the host-network agent pods for probes.
// A fake node serves nothing but its health to anyone: loopback only.
func (c *Config) kubeletAddress() string {
	if c.RuntimeOf() == RuntimeContainerd {
		return "0.0.0.0"
	}
	return "127.0.0.1"
}

// criSocket is the node's CRI endpoint: its fake runtime's or its
// containerd's.
func (c *Config) criSocket(node string) string {
	if c.RuntimeOf() == RuntimeContainerd {
		return c.ContainerdSocket(node)
	}
	return filepath.Join(c.RunDir(node), "cri.sock")
}

func (c *Config) startNode(s *State, p *pki, n Node, images []image) error {
	dir := c.NodeDir(n.Name)
	for _, d := range []string{dir, c.CDIDir(n.Name), c.RecordDir(n.Name)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.makeRunDir(n.Name); err != nil {
		return err
	}
	if c.RuntimeOf() == RuntimeContainerd {
		// The stand-in the daemon pods run, from the host (sim.driverRoot).
		if err := c.makeDriverRoot(n.Name); err != nil {
			return err
		}
		if err := shareMount(c.DriverRoot(n.Name)); err != nil {
			return fmt.Errorf("node %s: driver root: %w", n.Name, err)
		}
		if err := makeCgroupDirs(c.KubeletCgroupRoot(n.Name)); err != nil {
			return fmt.Errorf("node %s: kubelet cgroup root: %w", n.Name, err)
		}
		if err := c.startContainerd(s, n.Name, images); err != nil {
			return err
		}
	} else if err := c.startFakeRuntime(s, n.Name); err != nil {
		return err
	}
	hosts, _ := c.imexHosts() // checked at Up
	for _, h := range hosts {
		if h.node == n.Name && c.hostIMEX() {
			if err := c.startIMEX(s, h); err != nil {
				return fmt.Errorf("IMEX daemon: %w", err)
			}
		}
	}
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	if err := p.writeKubeconfig(kubeconfig, c.server(s), "kubelet-"+n.Name); err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(c.kubeletConfig(s, p, n)), 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + c.KubeletRoot(n.Name),
		"--cert-dir=" + filepath.Join(dir, "kubelet-pki"),
		"--hostname-override=" + n.Name,
		"--node-labels=tessera.dev/simulated=" + n.Profile + ",tessera.dev/partitioning=" + n.PartitioningOf() + ",tessera.dev/sharing=" + n.SharingOf() + ",tessera.dev/runtime=" + c.RuntimeOf(),
		"--v=2",
	}
	if err := c.startKubelet(s, "kubelet-"+n.Name, c.bin("kubelet"), args...); err != nil {
		return err
	}
	if c.RuntimeOf() == RuntimeContainerd {
		return nil // the chart's DaemonSet runs the agent (installAgents)
	}
	return c.StartPlugin(s, n)
}

func (c *Config) startFakeRuntime(s *State, node string) error {
	if _, err := c.start(s, "fake-runtime-"+node, c.bin("fake-runtime"),
		"--socket="+c.criSocket(node), "--cdi-spec-dir="+c.CDIDir(node), "--record-dir="+c.RecordDir(node)); err != nil {
		return err
	}
	if err := waitFile(c.criSocket(node), 20*time.Second); err != nil {
		return fmt.Errorf("fake runtime socket: %w\n%s", err, tail(filepath.Join(c.LogDir(), "fake-runtime-"+node+".log"), 20))
	}
	return nil
}

// StartPlugin starts a node's tessera-kubelet-plugin (also used by tests
// that restart it) with the admin kubeconfig.
func (c *Config) StartPlugin(s *State, n Node) error {
	return c.StartPluginWithKubeconfig(s, n, c.Kubeconfig())
}

// StartPluginWithKubeconfig starts a node's plugin with another kubeconfig,
// e.g. one of WriteKubeconfigAs that makes it act as the chart's service
// account.
func (c *Config) StartPluginWithKubeconfig(s *State, n Node, kubeconfig string) error {
	_, err := c.start(s, "plugin-"+n.Name, c.PluginBin, append([]string{
		"--node-name=" + n.Name,
		"--backend=sim",
		"--sim-profile=" + n.Profile,
		"--partitioning=" + n.PartitioningOf(),
		"--sharing=" + n.SharingOf(),
		// The shared node (l4-4) has a legacy-MPS driver: the demo and the
		// suite show what an operator who opts in to sharing its GPUs gets
		// (each share's status says the control pipe is shared), which is
		// not the agent's default (whole).
		"--legacy-mps-shares=share",
		"--sim-state-dir=" + c.SimStateDir(n.Name),
		"--kubeconfig=" + kubeconfig,
		"--plugin-data-dir=" + c.PluginDataDir(n.Name),
		"--registrar-dir=" + filepath.Join(c.KubeletRoot(n.Name), "plugins_registry"),
		"--cdi-dir=" + c.CDIDir(n.Name),
		// Each node's plugin shares the host: its own port, loopback only.
		"--metrics-address=" + metricsAddress(s, n.Name),
		// /metrics authenticated (the default), over HTTPS with a
		// certificate of the cluster CA (metricsauth.go).
		"--metrics-tls-cert-file=" + c.pkiPath(metricsCert(n.Name)+".crt"),
		"--metrics-tls-key-file=" + c.pkiPath(metricsCert(n.Name)+".key"),
		// Its own kubelet's PodResources, polled often so a test sees a
		// pod's tessera_device_allocation_info come and go in seconds.
		"--pod-resources-socket=" + c.PodResourcesSocket(n.Name),
		"--attribution-poll=" + AttributionPoll,
		"--telemetry-poll=" + TelemetryPoll,
		"--v=4",
	}, append(n.passthroughArgs(), c.imexArgs(n.Name)...)...)...)
	return err
}

// passthroughArgs are the agent's flags for n's passthrough.
func (n Node) passthroughArgs() []string {
	if !n.Passthrough {
		return nil
	}
	return []string{"--passthrough"}
}

func metricsPort(node string) string { return "metrics-" + node }

func metricsAddress(s *State, node string) string {
	return "127.0.0.1:" + strconv.Itoa(s.Ports[metricsPort(node)])
}

// PrometheusAddress is the address kept free for a Prometheus scraping
// the cluster's agents (test/e2e starts one there).
func PrometheusAddress(s *State) string { return "127.0.0.1:" + strconv.Itoa(s.Ports["prometheus"]) }

// MetricsAddress is the host:port of a node's plugin's /metrics.
func MetricsAddress(s *State, node string) string { return metricsAddress(s, node) }

// MetricsURL is the /metrics URL of a node's plugin: HTTPS, verified
// against the cluster CA, /metrics for an authorized token only
// (Config.MetricsClient).
func MetricsURL(s *State, node string) string {
	return "https://" + metricsAddress(s, node) + "/metrics"
}

// StopPlugin stops a node's plugin (tests).
func (c *Config) StopPlugin(s *State, node string) error {
	for i := len(s.Procs) - 1; i >= 0; i-- {
		if s.Procs[i].Name == "plugin-"+node {
			if err := stop(s.Procs[i], 10*time.Second); err != nil {
				return err
			}
			s.Procs = append(s.Procs[:i], s.Procs[i+1:]...)
			return c.saveState(s)
		}
	}
	return fmt.Errorf("no plugin process for node %s", node)
}

// KillPlugin SIGKILLs a node's plugin, as a crash or the OOM killer would:
// no signal handler runs, nothing is cleaned up (chaos tests).
func (c *Config) KillPlugin(s *State, node string) error {
	_, err := c.kill(s, "plugin-"+node)
	return err
}

// RestartKubelet SIGKILLs a node's kubelet and starts it again with the
// same arguments, as a crashed kubelet comes back (chaos tests).
func (c *Config) RestartKubelet(s *State, node string) error {
	p, err := c.StopKubelet(s, node)
	if err != nil {
		return err
	}
	return c.StartKubelet(s, p)
}

// StopKubelet SIGKILLs a node's kubelet and returns how it ran, for
// StartKubelet: a kubelet that is down for a while (tests).
func (c *Config) StopKubelet(s *State, node string) (Proc, error) {
	return c.kill(s, "kubelet-"+node)
}

// StartKubelet starts a kubelet StopKubelet stopped, with its arguments.
func (c *Config) StartKubelet(s *State, p Proc) error {
	return c.startKubelet(s, p.Name, p.Args[0], p.Args[1:]...)
}

// kill SIGKILLs the recorded process name (and its group), waits until it
// is gone and forgets it.
func (c *Config) kill(s *State, name string) (Proc, error) {
	for i := len(s.Procs) - 1; i >= 0; i-- {
		if p := s.Procs[i]; p.Name == name {
			_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
			for j := 0; alive(p) && !zombie(p.Pid); j++ {
				if j == 200 {
					return p, fmt.Errorf("%s (pid %d) survived SIGKILL", p.Name, p.Pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
			s.Procs = append(s.Procs[:i], s.Procs[i+1:]...)
			return p, c.saveState(s)
		}
	}
	return Proc{}, fmt.Errorf("no process %s", name)
}

// SaveState persists s (tests that start or stop processes).
func (c *Config) SaveState(s *State) error { return c.saveState(s) }

func waitFile(path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// admin kubeconfig is written once the apiserver certs exist.
func (c *Config) writeAdminKubeconfig(p *pki, s *State) error {
	return p.writeKubeconfig(c.Kubeconfig(), c.server(s), "admin")
}
