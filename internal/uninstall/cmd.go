package uninstall

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/agent"
	"github.com/tessera-gpu/tessera/internal/flagenv"
)

// Steps are the subcommands of `tessera-kubelet-plugin uninstall`.
var Steps = []string{"check", "node", "wait", "ready"}

// Main runs `tessera-kubelet-plugin uninstall <step> [flags]`.
func Main(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("uninstall: a step is required: one of %v", Steps)
	}
	name := "tessera-kubelet-plugin uninstall " + args[0]
	switch args[0] {
	case "check":
		var c apiConfig
		return flagenv.Run(name, args[1:], &c, func(ctx context.Context) error {
			client, err := c.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, c.Timeout)
			defer cancel()
			return Check(ctx, client, c.Namespace, c.AgentSelector)
		})
	case "wait":
		var c apiConfig
		return flagenv.Run(name, args[1:], &c, func(ctx context.Context) error {
			client, err := c.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, c.Timeout)
			defer cancel()
			if err := Wait(ctx, client, c.Namespace, c.DaemonSets, c.Poll); err != nil {
				return err
			}
			if c.IMEXPools {
				return DeleteChannelPools(ctx, client)
			}
			return nil
		})
	case "node":
		var c nodeConfig
		return flagenv.Run(name, args[1:], &c, func(ctx context.Context) error {
			r, err := Node(ctx, &c.Config, agent.NewBackend)
			if err != nil {
				return err
			}
			if err := MarkDone(c.DoneDir, r); err != nil {
				return err
			}
			// Stay, ready, until the DaemonSet is deleted.
			<-ctx.Done()
			return nil
		})
	case "ready":
		var c readyConfig
		return flagenv.Run(name, args[1:], &c, func(context.Context) error { return Ready(c.DoneDir) })
	}
	return fmt.Errorf("uninstall: unknown step %q: one of %v", args[0], Steps)
}

// doneDirFlag is where the node step marks its node clean.
func doneDirFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "done-dir", "/run/tessera-uninstall", "Directory (the cleanup pod's own) where the node step marks the node clean, for the ready step.")
}

// nodeConfig: the agent's flags (the cleanup pod gets the agent's), and
// the done directory.
type nodeConfig struct {
	agent.Config
	DoneDir string
}

func (c *nodeConfig) AddFlags(fs *pflag.FlagSet) {
	c.Config.AddFlags(fs)
	doneDirFlag(fs, &c.DoneDir)
}

type readyConfig struct{ DoneDir string }

func (c *readyConfig) AddFlags(fs *pflag.FlagSet) { doneDirFlag(fs, &c.DoneDir) }
func (c *readyConfig) Validate() error            { return nil }

// apiConfig: the flags of the steps that talk to the API server (as
// their Job's ServiceAccount, in cluster).
type apiConfig struct {
	Kubeconfig    string
	Namespace     string
	AgentSelector string
	DaemonSets    []string
	IMEXPools     bool
	Poll          time.Duration
	Timeout       time.Duration
}

func (c *apiConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Kubeconfig; empty: in cluster.")
	fs.StringVar(&c.Namespace, "namespace", "", "The release's namespace.")
	fs.StringVar(&c.AgentSelector, "agent-selector", "", "check: label selector of the release's agent pods (their nodes are the release's).")
	fs.StringSliceVar(&c.DaemonSets, "daemonset", nil, "wait: the node cleanup DaemonSets (repeated).")
	fs.BoolVar(&c.IMEXPools, "imex-pools", false, "wait: once the nodes are clean, delete the driver's IMEX channel pools (the release offered IMEX channels).")
	fs.DurationVar(&c.Poll, "poll", 2*time.Second, "wait: how often the cleanup's progress is read.")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "How long the step may take.")
}

func (c *apiConfig) Validate() error {
	if c.Namespace == "" {
		return fmt.Errorf("--namespace is required")
	}
	return nil
}

func (c *apiConfig) client() (kubernetes.Interface, error) {
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
	cfg.UserAgent = "tessera-uninstall"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	klog.V(2).InfoS("API server", "host", cfg.Host)
	return client, nil
}
