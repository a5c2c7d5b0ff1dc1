// Command tessera-webhook is Tessera's validating admission webhook: it
// refuses ResourceClaims, ResourceClaimTemplates and DeviceClasses whose
// gpu.tessera.dev opaque config is invalid, when they are written.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

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
	flush, help, err := flagenv.Parse("tessera-webhook", os.Args[1:], cfg.AddFlags, os.LookupEnv)
	if err != nil || help {
		return err
	}
	defer flush()
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	return webhook.Run(ctx, &cfg)
}
