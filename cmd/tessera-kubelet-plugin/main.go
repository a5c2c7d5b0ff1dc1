// Command tessera-kubelet-plugin is Tessera's node agent: it publishes the
// node's GPUs as ResourceSlices and prepares claims for the kubelet.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/agent"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tessera-kubelet-plugin:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg agent.Config
	logCfg := logsapi.NewLoggingConfiguration()
	gate := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(gate); err != nil {
		return err
	}
	fs := pflag.NewFlagSet("tessera-kubelet-plugin", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	logsapi.AddFlags(logCfg, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return nil
		}
		return err
	}
	if err := agent.ApplyEnv(fs, os.LookupEnv); err != nil {
		return err
	}
	if err := logsapi.ValidateAndApply(logCfg, gate); err != nil {
		return err
	}
	defer logs.FlushLogs()
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	return agent.Run(ctx, &cfg)
}
