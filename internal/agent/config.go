package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/driver"
	"github.com/tessera-gpu/tessera/internal/flagenv"
	"github.com/tessera-gpu/tessera/internal/health"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/podresources"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/telemetry"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// Config holds the agent's flags. Every flag can also be set through an
// environment variable named TESSERA_<FLAG> (dashes as underscores), which
// is how the Helm chart sets them; a flag on the command line wins.
type Config struct {
	NodeName          string
	Backend           string
	SimProfile        string
	SimStateDir       string
	SysfsRoot         string
	DryRun            bool
	Kubeconfig        string
	KubeAPIQPS        float32
	KubeAPIBurst      int
	PluginDataDir     string
	RegistrarDir      string
	CDIDir            string
	CheckpointPath    string
	VendorCDIDirs     []string
	MetricsAddress    string
	Profiling         bool
	ProfilingAddress  string
	Partitioning      string
	Sharing           string
	MinShareIsolation string
	LegacyMPSShares   string
	// The memory limit hook the claims' CDI specs name (internal/memlimit).
	MemoryLimitHook     string
	MemoryLimitStateDir string
	DynamicProfiles     []string
	DynamicWindow       int
	MPSRoot             string
	// PodUID is the agent's pod's UID, for rolling updates with surge.
	PodUID string
	// DrainTimeout bounds how long a stopping agent finishes the kubelet's
	// calls in flight.
	DrainTimeout time.Duration
	// Where the MPS control daemons run (mpsdaemons.go).
	MPSDaemons              string
	MPSDaemonNamespace      string
	MPSDaemonImage          string
	MPSDaemonServiceAccount string
	MPSDaemonPrivileged     bool
	MPSDaemonPriorityClass  string
	// IMEXChannels and IMEXNamespace: the channels offered for the node's
	// multi-node NVLink domain, and where its lease is held (imex.go).
	IMEXChannels  int
	IMEXNamespace string
	IMEXCtl       string
	// Who runs the node's IMEX daemon, and where (imexdaemon.go).
	IMEXDaemons   string
	IMEXDaemonDir string
	IMEXAddress   string
	// Health policy (internal/health).
	HealthXIDPolicy          string
	HealthWindow             time.Duration
	HealthCorrectedThreshold int64
	HealthPoll               time.Duration
	MPSControl               string
	NvidiaSMI                string
	// The NVIDIA driver's root on the host and where the agent and the MPS
	// daemon pods see it (driverroot.go).
	NvidiaDriverRoot      string
	NvidiaDriverRootMount string
	// Attribution of devices to pods (internal/podresources).
	AttributionPoll    time.Duration
	PodResourcesSocket string
	// TelemetryPoll is how often the backend's device telemetry is read
	// (internal/telemetry); 0 turns it off.
	TelemetryPoll time.Duration
	// Passthrough lets claims of the vfio class pass GPUs through to
	// virtual machines (docs/vfio.md).
	Passthrough bool
	// DeviceMetadata writes each prepared device's attributes into the
	// file the kubelet mounts (KEP-5304, docs/claims.md).
	DeviceMetadata bool

	// Who may read /metrics, and over what (metricsauth.go).
	MetricsAuth        bool
	MetricsTLSCertFile string
	MetricsTLSKeyFile  string
}

// DefaultMetricsAddress is on by default so that the chart's metrics Service
// and ServiceMonitor work without extra values, on every interface because
// Prometheus scrapes the pod IP. The port is not 9400 (dcgm-exporter's
// default, on the same GPU nodes), 9100 (node-exporter) or a kubelet or
// kube-proxy port: a host-network agent that collided with one of those
// would fail to start.
const DefaultMetricsAddress = ":9478"

// DefaultProfilingAddress serves Go's profiles, with --profiling, on the
// loopback only: pprof has no authentication and exposes the agent's
// memory and command line, so it is reached through a port-forward, never
// from another pod.
const DefaultProfilingAddress = "127.0.0.1:9479"

// AddFlags registers the agent's flags on fs.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.NodeName, "node-name", "", "Name of this node; the pool and the owner of the published ResourceSlices. Required.")
	fs.StringVar(&c.Backend, "backend", "auto", "Device backend: auto (nvml when libnvidia-ml loads, else amd when the KFD topology exists), nvml (NVIDIA, needs a cgo build), amd (amdgpu/KFD sysfs), or sim (simulated GPUs: an explicit choice, never a default, so a real node never publishes devices that do not exist).")
	fs.StringVar(&c.SimProfile, "sim-profile", "dgx-h100", "Simulated machine: a built-in catalogue name or a path to a machine YAML file (backend sim).")
	fs.StringVar(&c.SimStateDir, "sim-state-dir", "", "Directory of the simulated node's state and /dev tree (backend sim). Default /var/run/tessera/sim/<node-name>.")
	fs.StringVar(&c.SysfsRoot, "sysfs-root", "/", "Root under which /sys is read (backends amd and nvml); a fixture tree in tests.")
	fs.BoolVar(&c.Passthrough, "passthrough", false, "Pass GPUs allocated through the vfio.gpu.tessera.dev class to virtual machines (KubeVirt, Kata): bind each to vfio-pci at prepare through driver_override, give the container /dev/vfio/vfio and /dev/vfio/<group>, and give the GPU back to its driver at unprepare; publish iommuGroup on the GPUs whose IOMMU group can be passed, which the class selects. Needs the node's IOMMU on, vfio-pci loaded and <sysfs-root>/sys writable (the chart's passthrough.enabled). Off, such claims are refused; GPUs passed before are still given back (docs/vfio.md).")
	fs.BoolVar(&c.DeviceMetadata, "device-metadata", true, "Write each prepared device's attributes (those it is published with, and what prepare adds: a carved MIG instance's UUID, a share's limits, a passed GPU's IOMMU group) into the file the kubelet mounts into the claim's containers under /var/run/kubernetes.io/dra-device-attributes (KEP-5304 device metadata; KubeVirt reads a passed GPU's PCI address there). The files and their CDI specs go into --plugin-data-dir and --cdi-dir (docs/claims.md).")
	fs.BoolVar(&c.DryRun, "dry-run", false, "Print the node's ResourceSlices as a YAML stream of resource.k8s.io/v1 objects and exit, without a cluster.")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Empty means in-cluster configuration.")
	// The kubelet plugin helper GETs every claim before a prepare, so the
	// rate caps sustained prepares per second: at client-go's default 5
	// qps, 5 claims/s; at 50, a node starting pods in bulk was held to
	// ~50/s once the burst was spent. 200 keeps the agent's own work
	// (~1000 claims/s with 8 in flight) the limit only in bursts.
	fs.Float32Var(&c.KubeAPIQPS, "kube-api-qps", driver.DefaultKubeAPIQPS, "Queries per second to the API server (one claim GET per prepare, slice updates, status patches on failures and capacity shares); caps sustained prepares per second.")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", driver.DefaultKubeAPIBurst, "Burst of queries to the API server.")
	fs.StringVar(&c.PluginDataDir, "plugin-data-dir", "/var/lib/kubelet/plugins/gpu.tessera.dev", "Directory for the plugin's gRPC socket and checkpoint.")
	fs.StringVar(&c.RegistrarDir, "registrar-dir", "/var/lib/kubelet/plugins_registry", "Kubelet plugin registration directory.")
	fs.StringVar(&c.CDIDir, "cdi-dir", "/var/run/cdi", "Directory for the per-claim CDI specs.")
	fs.StringSliceVar(&c.VendorCDIDirs, "vendor-cdi-dirs", []string{"/etc/cdi", "/var/run/cdi"}, "Where to look for the node's NVIDIA CDI spec (nvidia-ctk cdi generate); its device IDs are returned with each claim's so driver libraries reach the container. Backend nvml only.")
	fs.StringVar(&c.CheckpointPath, "checkpoint", "", "Checkpoint file. Default <plugin-data-dir>/checkpoint.json.")
	fs.StringVar(&c.Partitioning, "partitioning", string(publish.Static), "How MIG-capable GPUs are published: static (the partitions that exist, cut by an operator) or dynamic (every MIG profile at every placement with shared counters; the driver carves the allocated one at prepare, destroys it at unprepare, and destroys partitions no claim owns at start). GPUs whose MIG mode change needs a reset (A100 class) publish by their current mode either way.")
	fs.StringSliceVar(&c.DynamicProfiles, "dynamic-profiles", nil, "With --partitioning=dynamic, publish only the placements of these MIG profiles (comma-separated, e.g. 1g.10gb,3g.40gb,7g.80gb; names of other GPU models are ignored on this node): fewer devices for the scheduler to scan per node. Empty publishes every profile. A partition that exists at a placement of another profile stays published.")
	fs.IntVar(&c.DynamicWindow, "dynamic-window", 2, "With --partitioning=dynamic, how many GPUs without partitions publish their placements; GPUs with partitions always do, and every whole GPU is published. Fewer devices for the scheduler to scan (an idle DGX H100: 58 instead of 208); a claim needing placements on more untouched GPUs at once than this waits until the window opens more (docs/performance.md). 0 publishes every placement.")
	fs.StringVar(&c.Sharing, "sharing", string(publish.SharingNone), "How devices are shared between claims: none (a device belongs to one claim; pods share it by naming the same claim) or capacity (whole GPUs and static partitions are multi-allocatable: a claim asks memory and compute units and the scheduler keeps their sum within the device; a claim asking none gets the whole device; on NVIDIA each share is enforced through the device's MPS daemon, on AMD it is scheduling-only accounting). GPUs published dynamically are never shared.")
	fs.StringVar(&c.MinShareIsolation, "min-share-isolation", string(isolation.None), "With --sharing=capacity, share only devices whose shares' memory limit is held at least this strongly (the memoryIsolation attribute): none (every device), process (NVIDIA's MPS client limits, which a process can unset) or kernel (a cgroup limit). Devices below it are published whole.")
	fs.StringVar(&c.LegacyMPSShares, "legacy-mps-shares", "whole", "With --sharing=capacity, what NVIDIA GPUs whose driver has legacy MPS only (before r615: no MPS v3 namespaces) do: whole (publish such GPUs whole, the default: no tenant can reach a neighbour's daemon) or share (every share of such a GPU mounts the one MPS daemon's pipe directory, control pipe included, so any tenant can stop or reconfigure the daemon serving its neighbours; its claim's status says so). The mpsNamespace attribute says which a GPU is.")
	fs.StringVar(&c.MemoryLimitHook, "memory-limit-hook", "", "The host path of tessera-cdi-hook (the chart installs it at /opt/tessera/bin/tessera-cdi-hook and mounts it at the same path into the agent). Where it is installed and the node offers cgroup v2 with the GPU's dmem region (and, on NVIDIA, an r615+ driver), shares are published memoryIsolation=kernel and each share's CDI spec runs the hook, which sets the share's hard memory limit on its container's cgroup before the container starts, or fails the container. Empty: no share is held by the kernel.")
	fs.StringVar(&c.MemoryLimitStateDir, "memory-limit-state-dir", "", "Where the hook records which container holds each share's limit (the hook's --state-dir). Default "+memlimit.DefaultStateDir+"; backend sim: <sim-state-dir>/memory-limits.")
	fs.StringVar(&c.PodUID, "pod-uid", "", "The agent's pod's UID (the downward API's metadata.uid). Set, the agent registers with the kubelet under a name of its pod's, beside the agent it replaces in a rolling update with surge, and in standby: the kubelet's calls wait until the old agent exits and this one takes the node's lock over (docs/operating.md). Needs a kubelet of 1.33 or later.")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", driver.DefaultDrainTimeout, "How long a stopping agent (SIGTERM: an upgrade, a drain) lets the kubelet's prepares and unprepares in flight finish, refusing new ones, before it unregisters. Keep it below the pod's termination grace period (the chart's 30 s); a prepare still running then is rolled back by the next agent.")
	fs.StringVar(&c.MPSRoot, "mps-root", "", "Directory of the MPS control daemons the agent runs (one per claim that configures MPS, one per shared device with capacity shares), each with its pipe directory (mounted into the claim's containers) and its logs (not mounted). Default /var/run/tessera/mps; backend sim: <sim-state-dir>/mps.")
	fs.StringVar(&c.MPSControl, "mps-control", "", "MPS control program and its leading arguments, space-separated. Default nvidia-cuda-mps-control; backend sim: the stand-in \"tessera-sim mps-control\" from the agent binary's directory, checked at start (the tessera-kubelet-plugin-sim image has it).")
	fs.StringVar(&c.MPSDaemons, "mps-daemons", MPSDaemonsProcess, "Where the MPS control daemons run: process (detached children of the agent: right where the agent's container shares the host's PID namespace, or the agent runs on the host) or pod (each a pod of this node, created with the agent's credentials, so that it outlives the agent's container and pod; needs --mps-daemon-namespace, --mps-daemon-image and --mps-daemon-service-account).")
	fs.IntVar(&c.IMEXChannels, "imex-channels", 0, "On a node whose GPUs are in a multi-node NVLink domain (GB200/GB300 NVL72), offer this many IMEX channels (1 to 2047) for the domain as devices of class imex.gpu.tessera.dev, one per pod group: the agents of the domain hold a lease in --imex-namespace in turn, and the holder publishes the domain's pool (docs/rack.md). Needs get, create and update on leases there. 0 offers none.")
	fs.StringVar(&c.IMEXCtl, "imex-ctl", "", "With --imex-channels, the IMEX control program and its leading arguments, space-separated, which the agent runs with -q to learn whether the node's IMEX daemon is ready before it prepares a channel. Default nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg, run inside --nvidia-driver-root where one is set; backend sim: the stand-in \"tessera-sim imex-ctl\" beside the agent, with the simulated node's <sim-state-dir>/imex/config.cfg.")
	fs.StringVar(&c.IMEXDaemons, "imex-daemons", IMEXDaemonsHost, "With --imex-channels, who runs the node's IMEX daemon: host (the host's nvidia-imex service, configured with the domain's trays, which the agent only asks) or pod (the agent, as a pod of this node: started for the first claim of an IMEX channel prepared here and stopped after the last, its peers the nodes labelled with the domain, each at its "+names.NodeAnnotationIMEXAddress+" annotation or InternalIP; the pod takes the MPS daemon pods' --mps-daemon-* image, service account, privilege and priority class; needs list on nodes, and with backend nvml --nvidia-driver-root, whose nvidia-imex it runs).")
	fs.StringVar(&c.IMEXDaemonDir, "imex-daemon-dir", "", "With --imex-daemons=pod, the host directory of the daemon's config file, nodes file and command socket, mounted at the same path in the agent and the pod. Default "+DefaultIMEXDaemonDir+"; backend sim: <sim-state-dir>/imex.")
	fs.StringVar(&c.IMEXAddress, "imex-address", "", "With --imex-daemons=pod, the address this node's IMEX peers reach its daemon at, where it is not the node's InternalIP: the agent annotates its node with it ("+names.NodeAnnotationIMEXAddress+").")
	fs.StringVar(&c.IMEXNamespace, "imex-namespace", "", "With --imex-channels, the namespace of the domains' leases. Default $POD_NAMESPACE, the agent's own.")
	fs.StringVar(&c.MPSDaemonNamespace, "mps-daemon-namespace", "", "With --mps-daemons=pod, the namespace of the daemon pods. Default $POD_NAMESPACE, the agent's own.")
	fs.StringVar(&c.MPSDaemonImage, "mps-daemon-image", "", "With --mps-daemons=pod, the daemon pods' image: the agent's own, which holds --mps-control at the same path.")
	fs.StringVar(&c.MPSDaemonServiceAccount, "mps-daemon-service-account", "", "With --mps-daemons=pod, the daemon pods' service account: one with no rights (its token is not mounted either).")
	fs.BoolVar(&c.MPSDaemonPrivileged, "mps-daemon-privileged", false, "With --mps-daemons=pod, run the daemon pods privileged: nvml's daemons open the GPU device nodes, which only a privileged container may; the simulator's stand-in needs nothing.")
	fs.StringVar(&c.MPSDaemonPriorityClass, "mps-daemon-priority-class", "", "With --mps-daemons=pod, the daemon pods' priority class: preempting a daemon kills its clients' CUDA calls.")
	fs.StringVar(&c.NvidiaDriverRoot, "nvidia-driver-root", "", "The NVIDIA driver's root on the host: / where the driver is installed on the node, /run/nvidia/driver under the GPU Operator. Set, libnvidia-ml.so.1 is loaded from its library directories (usr/lib64, usr/lib/x86_64-linux-gnu, usr/lib/aarch64-linux-gnu, lib64, ...) and the MPS control program (backend sim: the stand-in) is run from its program directories (usr/bin, usr/sbin, bin, sbin, opt/bin) unless --mps-control is set; either missing stops the agent naming the paths tried. The MPS daemon pods mount it read-only at --nvidia-driver-root-mount. Empty: libnvidia-ml by the loader's search, the MPS control program by PATH.")
	fs.StringVar(&c.NvidiaDriverRootMount, "nvidia-driver-root-mount", "", "Where --nvidia-driver-root is mounted in the agent's container, and in the MPS daemon pods (the chart: /driver-root). Default: --nvidia-driver-root itself (an agent on the host).")
	fs.StringVar(&c.NvidiaSMI, "nvidia-smi", "nvidia-smi", "nvidia-smi binary that sets time-slice intervals (compute-policy), which NVML has no call for (backend nvml).")
	def := health.DefaultPolicy()
	fs.StringVar(&c.HealthXIDPolicy, "health-xid-policy", "", "Site overrides of the XID classification, code=Effect,... with Effect Ignore, None, NoSchedule or NoExecute (e.g. 43=NoSchedule). See docs/health.md for the built-in table.")
	fs.DurationVar(&c.HealthWindow, "health-window", def.Window, "Window of the corrected-error rate that marks a GPU degrading, and how long a clearable condition (degrading, XIDs of effect None or NoSchedule) must see nothing new before it clears.")
	fs.Int64Var(&c.HealthCorrectedThreshold, "health-corrected-threshold", def.CorrectedThreshold, "Corrected errors (ECC single-bit, AMD RAS correctable) within --health-window that taint a GPU NoSchedule as degrading; 0 disables.")
	fs.DurationVar(&c.HealthPoll, "health-poll", 30*time.Second, "How often the nvml and amd backends read error counters (ECC totals, remapped rows, retired pages, RAS) and probe GPUs that stopped answering; XID and ECC events arrive as they happen.")
	fs.DurationVar(&c.AttributionPoll, "attribution-poll", 10*time.Second, "How often the kubelet's PodResources API is asked which pod and container use which device, for tessera_device_allocation_info (pod and namespace names of every tenant on the metrics port: protect it, docs/metrics.md). 0 disables it.")
	fs.StringVar(&c.PodResourcesSocket, "pod-resources-socket", podresources.DefaultSocket, "The kubelet's PodResources socket (<kubelet root>/pod-resources/kubelet.sock), for --attribution-poll.")
	fs.DurationVar(&c.TelemetryPoll, "telemetry-poll", telemetry.DefaultInterval, "How often the backend's device telemetry (memory, utilization, temperature, power, SM clock) is read for the tessera_gpu_* metrics, on its own timer, never on a scrape (docs/metrics.md). 0 disables it.")
	fs.StringVar(&c.MetricsAddress, "metrics-address", DefaultMetricsAddress, "host:port serving Prometheus /metrics and /healthz. Empty disables them. A port in use stops the agent at start.")
	fs.BoolVar(&c.MetricsAuth, "metrics-auth", true, "Serve --metrics-address over HTTPS and let only callers whose bearer token the API server accepts (a TokenReview) and who may get the non-resource URL /metrics (a SubjectAccessReview) read /metrics; /healthz and /readyz stay open for the kubelet's probes. The agent's credentials need create on tokenreviews and subjectaccessreviews. false serves plain HTTP to anyone who reaches the port, and with --attribution-poll every tenant's pod, namespace, claim and container names with it (docs/metrics.md).")
	fs.StringVar(&c.MetricsTLSCertFile, "metrics-tls-cert-file", "", "With --metrics-auth, the metrics port's serving certificate (PEM, with its chain), read again when it changes. Empty: a self-signed certificate generated at each start, which a scraper cannot verify (it skips verification; the traffic is still encrypted).")
	fs.StringVar(&c.MetricsTLSKeyFile, "metrics-tls-key-file", "", "The private key of --metrics-tls-cert-file (PEM).")
	fs.BoolVar(&c.Profiling, "profiling", false, "Serve Go's /debug/pprof on --profiling-address, for profiling the agent where it runs: kubectl port-forward to the agent's pod, then go tool pprof http://127.0.0.1:9479/debug/pprof/profile?seconds=30.")
	fs.StringVar(&c.ProfilingAddress, "profiling-address", DefaultProfilingAddress, "host:port of --profiling's /debug/pprof; the host must be a loopback address (pprof has no authentication).")
}

// ApplyEnv sets every flag not given on the command line from TESSERA_<FLAG>.
func ApplyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	return flagenv.Apply(fs, "TESSERA_", lookup)
}

// Validate checks the flags and fills defaults that depend on others.
func (c *Config) Validate() error {
	if c.NodeName == "" {
		c.NodeName = os.Getenv("NODE_NAME")
	}
	if c.NodeName == "" {
		return fmt.Errorf("--node-name is required")
	}
	if c.SimStateDir == "" {
		c.SimStateDir = filepath.Join("/var/run/tessera/sim", c.NodeName)
	}
	if c.CheckpointPath == "" {
		c.CheckpointPath = filepath.Join(c.PluginDataDir, "checkpoint.json")
	}
	if _, err := publish.ParsePartitioning(c.Partitioning); err != nil {
		return fmt.Errorf("--partitioning: %w", err)
	}
	for _, p := range c.DynamicProfiles {
		if p == "" || strings.ContainsAny(p, " \t=") {
			return fmt.Errorf("--dynamic-profiles: %q is not a profile name (e.g. 1g.10gb)", p)
		}
	}
	if c.DynamicWindow < 0 {
		return fmt.Errorf("--dynamic-window: %d GPUs; 0 or more (0 publishes every placement)", c.DynamicWindow)
	}
	if _, err := publish.ParseSharing(c.Sharing); err != nil {
		return fmt.Errorf("--sharing: %w", err)
	}
	if _, err := isolation.ParseLevel(c.MinShareIsolation); c.MinShareIsolation != "" && err != nil {
		return fmt.Errorf("--min-share-isolation: %w", err)
	}
	for flag, p := range map[string]string{"--memory-limit-hook": c.MemoryLimitHook, "--memory-limit-state-dir": c.MemoryLimitStateDir} {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("%s: %q is not an absolute path (the runtime runs the hook on the host)", flag, p)
		}
	}
	if l := c.LegacyMPSShares; l != "" && l != "share" && l != "whole" {
		return fmt.Errorf("--legacy-mps-shares: %q is neither share nor whole", c.LegacyMPSShares)
	}
	if _, _, err := c.driverRoot(); err != nil {
		return err
	}
	if c.NvidiaDriverRoot == "" && c.NvidiaDriverRootMount != "" {
		return fmt.Errorf("--nvidia-driver-root-mount %q without --nvidia-driver-root", c.NvidiaDriverRootMount)
	}
	if err := errors.Join(c.validateMPSDaemons(), c.validateMetricsAuth(), c.validateIMEX(), c.validateIMEXDaemons()); err != nil {
		return err
	}
	if _, err := health.ParseXIDOverrides(nil, c.HealthXIDPolicy); err != nil {
		return fmt.Errorf("--health-xid-policy: %w", err)
	}
	if c.HealthWindow == 0 {
		c.HealthWindow = health.DefaultPolicy().Window
	}
	if c.HealthWindow < 0 {
		return fmt.Errorf("--health-window: %s is negative", c.HealthWindow)
	}
	if c.HealthCorrectedThreshold < 0 {
		return fmt.Errorf("--health-corrected-threshold: %d is negative", c.HealthCorrectedThreshold)
	}
	if c.DrainTimeout < 0 {
		return fmt.Errorf("--drain-timeout: %s is negative", c.DrainTimeout)
	}
	if c.AttributionPoll < 0 {
		return fmt.Errorf("--attribution-poll: %s is negative", c.AttributionPoll)
	}
	if c.TelemetryPoll < 0 {
		return fmt.Errorf("--telemetry-poll: %s is negative", c.TelemetryPoll)
	}
	if c.Profiling {
		if err := loopbackOnly(c.ProfilingAddress); err != nil {
			return fmt.Errorf("--profiling-address: %w", err)
		}
	}
	return nil
}

// loopbackOnly accepts host:port whose host is a loopback IP or localhost.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: the host must be a loopback address such as 127.0.0.1 (pprof has no authentication)", addr)
	}
	return nil
}

// healthPolicy is the health policy the flags select (Validate checked them).
func (c *Config) healthPolicy() health.Policy {
	p := health.DefaultPolicy()
	p.XID, _ = health.ParseXIDOverrides(p.XID, c.HealthXIDPolicy)
	p.Window, p.CorrectedThreshold = c.HealthWindow, c.HealthCorrectedThreshold
	return p
}

// driverOptions are the agent's options for backend b that the flags
// select (Validate checked them): what the running agent and --dry-run
// publish with. Run adds what only a running agent has.
func (c *Config) driverOptions(b backend.Backend) driver.Options {
	p, _ := publish.ParsePartitioning(c.Partitioning)
	s, _ := publish.ParseSharing(c.Sharing)
	return driver.Options{
		NodeName:          c.NodeName,
		Backend:           b,
		PluginDataDir:     c.PluginDataDir,
		RegistrarDir:      c.RegistrarDir,
		CDIDir:            c.CDIDir,
		VendorCDIDirs:     vendorDirs(c, b),
		CheckpointPath:    c.CheckpointPath,
		Partitioning:      p,
		Sharing:           s,
		Profiles:          c.DynamicProfiles,
		DynamicWindow:     c.DynamicWindow,
		Health:            c.healthPolicy(),
		Host:              c.host(b),
		MinShareIsolation: isolation.Level(c.MinShareIsolation),
		WholeLegacyMPS:    c.LegacyMPSShares == "whole",
		DrainTimeout:      c.DrainTimeout,
		IMEXChannels:      c.IMEXChannels,
		IMEXNamespace:     c.IMEXNamespace,
		Passthrough:       c.Passthrough,
		VFIO:              c.pciSysfs(b),
		DeviceMetadata:    c.DeviceMetadata,
	}
}

// pciSysfs is the node's PCI sysfs, where GPUs are passed through: the
// host's below --sysfs-root, or the simulator's own tree.
func (c *Config) pciSysfs(b backend.Backend) vfio.Sysfs {
	if p, ok := b.(backend.PCIHost); ok {
		return p.PCISysfs()
	}
	return vfio.HostSysfs(filepath.Join(c.SysfsRoot, "sys"))
}

// host is what the node's cgroups offer for device memory limits: the
// host's /sys/fs/cgroup (below --sysfs-root), or the simulator's own tree.
// A root it cannot read whole is logged and judged by what it could read:
// a share is then held no more strongly than that shows.
func (c *Config) host(b backend.Backend) isolation.Host {
	root := filepath.Join(c.SysfsRoot, "sys/fs/cgroup")
	if cr, ok := b.(backend.CgroupRooter); ok {
		root = cr.CgroupRoot()
	}
	h, err := isolation.ReadHost(root)
	if err != nil {
		klog.Background().Error(err, "Reading what the node's cgroups offer for GPU memory limits", "root", root)
	}
	if err := h.FindHook(c.memoryLimitHook(b)); err != nil {
		klog.Background().Error(err, "No share is held by a kernel memory limit on this node")
	}
	return h
}

// memoryLimitHook is how the claims' CDI specs run the hook: against the
// host's cgroup root (the hook runs in the runtime's namespaces, not
// below --sysfs-root), or the simulator's tree.
func (c *Config) memoryLimitHook(b backend.Backend) memlimit.Hook {
	h := memlimit.Hook{Path: c.MemoryLimitHook, CgroupRoot: "/sys/fs/cgroup", StateDir: c.MemoryLimitStateDir}
	if cr, ok := b.(backend.CgroupRooter); ok {
		h.CgroupRoot, h.Simulated = cr.CgroupRoot(), true
		if h.StateDir == "" {
			h.StateDir = filepath.Join(filepath.Dir(cr.CgroupRoot()), "memory-limits")
		}
	}
	if h.StateDir == "" {
		h.StateDir = memlimit.DefaultStateDir
	}
	return h
}

// pluginOptions name the node's kubelet plugin, for a standby.
func (c *Config) pluginOptions(client kubernetes.Interface) driver.PluginOptions {
	return driver.PluginOptions{NodeName: c.NodeName, KubeClient: client, PluginDataDir: c.PluginDataDir, RegistrarDir: c.RegistrarDir, PodUID: c.PodUID,
		DeviceMetadata: c.DeviceMetadata, CDIDir: c.CDIDir}
}
