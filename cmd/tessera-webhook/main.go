// Command tessera-webhook is Tessera's validating admission webhook: it
// refuses ResourceClaims, ResourceClaimTemplates and DeviceClasses whose
// gpu.tessera.dev opaque config is invalid, when they are written.
package main

import (
	"context"
	"errors"
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

	"github.com/tessera-gpu/tessera/pkg/flagenv"
	"github.com/tessera-gpu/tessera/pkg/webhook"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tessera-webhook:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg webhook.Config
	logCfg := logsapi.NewLoggingConfiguration()
	gate := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(gate); err != nil {
		return err
	}
	fs := pflag.NewFlagSet("tessera-webhook", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	logsapi.AddFlags(logCfg, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	// Every flag can also be set as TESSERA_<FLAG>, as the chart does.
	if err := flagenv.Apply(fs, "TESSERA_", os.LookupEnv); err != nil {
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
	return webhook.Run(ctx, &cfg)
}
