package agent

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/backend/sim"
	"github.com/tessera-gpu/tessera/pkg/driver"
	"github.com/tessera-gpu/tessera/pkg/host"
)

// NewBackend builds the backend the flags name.
func NewBackend(c *Config) (backend.Backend, error) {
	switch c.Backend {
	case "sim":
		m, err := sim.Profile(c.SimProfile, c.NodeName)
		if err != nil {
			return nil, fmt.Errorf("--sim-profile: %w", err)
		}
		return sim.New(m, c.SimStateDir)
	case "nvml", "amd", "auto":
		return nil, fmt.Errorf("--backend=%s: not part of this build yet; use --backend=sim", c.Backend)
	default:
		return nil, fmt.Errorf("--backend=%q: unknown backend; want sim, nvml, amd or auto", c.Backend)
	}
}

// Run runs the agent until ctx ends. With DryRun it prints slices and returns.
func Run(ctx context.Context, c *Config) error {
	b, err := NewBackend(c)
	if err != nil {
		return err
	}
	if c.DryRun {
		return DryRun(ctx, c.NodeName, b, os.Stdout)
	}
	client, err := kubeClient(c)
	if err != nil {
		return err
	}
	bootID, err := host.BootID()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot read boot id; reboots will not be detected")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d, err := driver.New(ctx, driver.Options{
		NodeName:       c.NodeName,
		Backend:        b,
		KubeClient:     client,
		PluginDataDir:  c.PluginDataDir,
		RegistrarDir:   c.RegistrarDir,
		CDIDir:         c.CDIDir,
		CheckpointPath: c.CheckpointPath,
		BootID:         bootID,
		Fatal:          func(err error) { cancel(err) },
	})
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil {
		return err
	}
	defer d.Stop()
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
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
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	return client, nil
}
