package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/backend/amdsysfs"
	"github.com/tessera-gpu/tessera/internal/driver"
	"github.com/tessera-gpu/tessera/internal/handover"
	"github.com/tessera-gpu/tessera/internal/host"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/podresources"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

// NewBackend builds the backend the flags name, its MPS daemons (if any)
// the agent's own children.
func NewBackend(ctx context.Context, c *Config) (backend.Backend, error) {
	return newBackend(ctx, c, nil)
}

// newBackend builds the backend the flags name; launcher runs its MPS
// daemons (nil: the agent's own children).
func newBackend(ctx context.Context, c *Config, launcher mps.Launcher) (backend.Backend, error) {
	logger := klog.FromContext(ctx)
	switch c.Backend {
	case "sim":
		m, err := sim.Profile(c.SimProfile, c.NodeName)
		if err != nil {
			return nil, fmt.Errorf("--sim-profile: %w", err)
		}
		control, err := c.driverMPSControl(logger)
		if err != nil {
			return nil, fmt.Errorf("--backend=sim: the MPS stand-in: %w", err)
		}
		if control == nil {
			if control, err = c.simMPSControl(); err != nil {
				return nil, err
			}
		}
		root := c.MPSRoot
		if root == "" {
			root = sim.MPSRoot(c.SimStateDir)
		}
		logger.Info("Publishing SIMULATED GPUs (--backend=sim): nothing here is real hardware", "profile", c.SimProfile, "stateDir", c.SimStateDir)
		return sim.New(m, c.SimStateDir, sim.WithLogger(logger), sim.WithMPS(root, control), sim.WithMPSLauncher(launcher))
	case "amd":
		b, err := amdsysfs.New(amdsysfs.Options{SysfsRoot: c.SysfsRoot, Logger: logger, HealthPollInterval: c.HealthPoll})
		if err != nil {
			return nil, fmt.Errorf("--backend=amd: %w", err)
		}
		return b, nil
	case "nvml":
		return newNVML(c, logger, launcher)
	case "auto":
		return autoBackend(c, logger, launcher)
	default:
		return nil, fmt.Errorf("--backend=%q: unknown backend; want sim, nvml, amd or auto", c.Backend)
	}
}

// SimImage is the agent image that holds the sim backend's stand-in; the
// production image (deployments/Dockerfile's default target) does not.
const SimImage = "ghcr.io/tessera-gpu/tessera-kubelet-plugin-sim"

// executable is os.Executable, replaced in tests.
var executable = os.Executable

// simMPSControl is --mps-control for the simulator: by default its stand-in,
// tessera-sim, which `make build` and the -sim image put beside the agent.
// It must be there when the agent starts, not at the first MPS claim, which
// would otherwise fail long after an operator could have fixed the image.
// A dry run starts no daemon and needs none.
func (c *Config) simMPSControl() ([]string, error) {
	if c.MPSControl != "" {
		return strings.Fields(c.MPSControl), nil
	}
	exe, err := executable()
	if err != nil {
		return nil, fmt.Errorf("--mps-control: find the stand-in beside the agent: %w", err)
	}
	standIn := filepath.Join(filepath.Dir(exe), "tessera-sim")
	if !c.DryRun {
		if err := checkStandIn(standIn); err != nil {
			return nil, err
		}
	}
	return []string{standIn, "mps-control"}, nil
}

// checkStandIn says what to do when the stand-in cannot be run.
func checkStandIn(path string) error {
	fi, err := os.Stat(path)
	if err == nil && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
		err = fmt.Errorf("not an executable file (mode %v)", fi.Mode())
	}
	if err != nil {
		return fmt.Errorf("--backend=sim: MPS stand-in %s: %w; the production image does not ship it: run the sim image %s (deployments/Dockerfile --target tessera-kubelet-plugin-sim), put tessera-sim beside the agent (make build), or set --mps-control", path, err, SimImage)
	}
	return nil
}

// autoBackend picks nvml when libnvidia-ml loads, else amd when the KFD
// topology exists, and says which and why.
func autoBackend(c *Config, logger klog.Logger, launcher mps.Launcher) (backend.Backend, error) {
	nvOK, nvWhy := detectNVML(c, logger)
	if nvOK {
		logger.Info("Backend auto-detected", "backend", "nvml", "reason", nvWhy)
		return newNVML(c, logger, launcher)
	}
	amdOK, amdWhy := amdsysfs.Detect(c.SysfsRoot)
	if amdOK {
		logger.Info("Backend auto-detected", "backend", "amd", "reason", amdWhy, "nvml", nvWhy)
		b, err := amdsysfs.New(amdsysfs.Options{SysfsRoot: c.SysfsRoot, Logger: logger, HealthPollInterval: c.HealthPoll})
		if err != nil {
			return nil, fmt.Errorf("--backend=auto chose amd: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("--backend=auto: no GPUs found: nvml: %s; amd: %s (use --backend=sim for simulated GPUs)", nvWhy, amdWhy)
}

// Run runs the agent until ctx ends. With DryRun it prints slices and returns.
func Run(ctx context.Context, c *Config) error {
	if c.DryRun {
		return runDryRun(ctx, c)
	}
	client, err := kubeClient(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// With a pod UID (a rolling update with surge), register first, in
	// standby: the kubelet's calls wait for the takeover below instead of
	// failing while the agent before this one still holds the node.
	var standby *driver.Standby
	if c.PodUID != "" {
		if standby, err = driver.StartStandby(ctx, c.pluginOptions(client)); err != nil {
			return err
		}
		defer func() {
			if standby != nil {
				standby.Stop()
			}
		}()
	}
	m, err := serveMetrics(ctx, c, client, standby != nil)
	if err != nil {
		return err
	}
	if standby != nil {
		m.SetReadiness(standby.Ready)
	}
	// Nothing of the node's state is touched before this (internal/handover).
	lock, err := handover.Acquire(ctx, filepath.Join(c.PluginDataDir, handover.LockName))
	if err != nil {
		return err
	}
	defer lock.Release()
	launcher, err := c.mpsLauncher(client, klog.FromContext(ctx))
	if err != nil {
		return err
	}
	b, err := newBackend(ctx, c, launcher)
	if err != nil {
		return err
	}
	if closer, ok := b.(io.Closer); ok {
		// The nvml backend holds an NVML session for the agent's lifetime.
		defer closer.Close()
	}
	o, err := c.runOptions(ctx, b, client, m, standby, cancel)
	if err != nil {
		return err
	}
	d, err := driver.New(ctx, o)
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil {
		return err
	}
	standby = nil // d's now: d.Stop unregisters it
	defer d.Stop()
	m.SetReadiness(d.Ready)
	pods := startAttribution(ctx, c, d, m)
	startTelemetry(ctx, c, b, d, m, pods)
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	return nil
}

// runDryRun prints the slices the node's backend would publish.
func runDryRun(ctx context.Context, c *Config) error {
	b, err := NewBackend(ctx, c)
	if err != nil {
		return err
	}
	if closer, ok := b.(io.Closer); ok {
		defer closer.Close()
	}
	return DryRun(ctx, c.driverOptions(b), os.Stdout)
}

// runOptions are the driver's options for a running agent: the flags'
// and what Run set up (client, metrics, standby), the boot id, and a fatal
// error ending Run through cancel. It starts the profiling server where
// the flags ask for it.
func (c *Config) runOptions(ctx context.Context, b backend.Backend, client kubernetes.Interface, m *metrics.Metrics, standby *driver.Standby, cancel context.CancelCauseFunc) (driver.Options, error) {
	o := c.driverOptions(b)
	bootID, err := bootIDOf(b)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot read boot id; reboots will not be detected")
	}
	if c.Profiling {
		if _, err := serveProfiling(ctx, c.ProfilingAddress); err != nil {
			return o, err
		}
	}
	o.KubeClient, o.BootID, o.Metrics, o.Standby = client, bootID, m, standby
	o.Fatal = func(err error) { cancel(err) }
	if o.IMEXHost, err = c.imexHost(klog.FromContext(ctx), b); err != nil {
		return o, err
	}
	if d, err := c.imexDaemon(klog.FromContext(ctx), b, client, o.IMEXHost); err != nil {
		return o, err
	} else if d != nil {
		o.IMEXDaemon, o.IMEXAddress = d, c.IMEXAddress
	}
	return o, nil
}

// bootIDOf is the boot id the checkpoint records: the backend's own where
// it has one (a simulated node reboots without its host), else the host's.
func bootIDOf(b backend.Backend) (string, error) {
	if bb, ok := b.(backend.BootIDer); ok {
		return bb.BootID(), nil
	}
	return host.BootID()
}

// startAttribution polls the kubelet's PodResources API for
// tessera_device_allocation_info, on its own interval, never on a scrape.
// Without metrics there is nothing to poll for.
// It returns the poller, nil when there is none, for startTelemetry's
// holder labels.
func startAttribution(ctx context.Context, c *Config, d *driver.Driver, m *metrics.Metrics) *podresources.Poller {
	if m == nil || c.AttributionPoll == 0 {
		return nil
	}
	p := podresources.NewPoller(c.PodResourcesSocket, names.DriverName, c.AttributionPoll, m.PodResourcesFailed)
	m.SetAllocationSource(func() []metrics.DeviceAllocation { return d.Attribution(p.Current()) })
	go p.Run(ctx)
	return p
}

// startTelemetry polls the backend's device telemetry for the tessera_gpu_*
// gauges, on its own interval, never on a scrape; a device's one holder
// comes from the attribution poll (pods), when there is one. Without
// metrics, or a backend that reads no telemetry, there is nothing to poll.
func startTelemetry(ctx context.Context, c *Config, b backend.Backend, d *driver.Driver, m *metrics.Metrics, pods *podresources.Poller) {
	tr, ok := b.(backend.TelemetryReader)
	if m == nil || c.TelemetryPoll == 0 || !ok {
		return
	}
	p := telemetry.NewPoller(tr.ReadTelemetry, c.TelemetryPoll, m.TelemetryPollFailed)
	m.SetTelemetrySource(func() []metrics.DeviceTelemetry {
		var allocs []podresources.Allocation
		if pods != nil {
			allocs = pods.Current()
		}
		return d.Telemetry(p.Current(), allocs)
	})
	go p.Run(ctx)
}

// serveMetrics serves the agent's metrics on --metrics-address until ctx
// ends, guarded as --metrics-auth says (metricsauth.go); with an empty
// address there are none (nil records nothing). It binds before the driver
// starts so that a bad address fails the agent at once.
//
// With handover, a port in use is the agent's before this one on the
// host network (a rolling update): it is taken once that one exits, and
// meanwhile that agent answers the probes, which is as true of the node.
func serveMetrics(ctx context.Context, c *Config, client kubernetes.Interface, handover bool) (*metrics.Metrics, error) {
	addr := c.MetricsAddress
	if addr == "" {
		return nil, nil
	}
	guard, tlsCfg, err := c.metricsServing(client, klog.FromContext(ctx))
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	h := m.GuardedHandler(guard)
	_, err = metrics.ListenTLS(ctx, addr, h, tlsCfg)
	if err == nil {
		return m, nil
	}
	if !handover || !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("--metrics-address: %w", err)
	}
	klog.FromContext(ctx).Info("Metrics address in use, by the agent this one replaces; serving it once that one exits", "address", addr)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			if _, err := metrics.ListenTLS(ctx, addr, h, tlsCfg); err == nil {
				return
			} else if !errors.Is(err, syscall.EADDRINUSE) {
				klog.FromContext(ctx).Error(err, "Serve metrics")
				return
			}
		}
	}()
	return m, nil
}

// serveProfiling serves Go's /debug/pprof on addr (a loopback address,
// Config.Validate) until ctx ends.
func serveProfiling(ctx context.Context, addr string) (net.Addr, error) {
	a, err := metrics.Listen(ctx, addr, metrics.ProfilingHandler())
	if err != nil {
		return nil, fmt.Errorf("--profiling-address: %w", err)
	}
	klog.FromContext(ctx).Info("Serving Go profiles on the loopback only", "url", "http://"+a.String()+"/debug/pprof/")
	return a, nil
}

// vendorDirs: only real NVIDIA GPUs have a vendor spec to look up; a
// simulator on a GPU host must not hand out the host's devices.
func vendorDirs(c *Config, b backend.Backend) []string {
	if b.Name() == "nvml" {
		return c.VendorCDIDirs
	}
	return nil
}

func kubeClient(c *Config) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if c.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kube client config: %w", err)
	}
	cfg.QPS, cfg.Burst = c.KubeAPIQPS, c.KubeAPIBurst
	cfg.UserAgent = "tessera-kubelet-plugin"
	// Protobuf, as the kubelet and the control plane use for built-in
	// types (the agent uses no others): the claim GET of every prepare
	// costs the API server and the agent less to encode and decode.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	return client, nil
}
