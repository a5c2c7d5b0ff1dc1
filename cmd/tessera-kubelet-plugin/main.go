// Command tessera-kubelet-plugin is Tessera's node agent: it publishes the
// node's GPUs as ResourceSlices and prepares claims for the kubelet.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/agent"
	"github.com/tessera-gpu/tessera/pkg/flagenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tessera-kubelet-plugin:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg agent.Config
	flush, help, err := flagenv.Parse("tessera-kubelet-plugin", os.Args[1:], cfg.AddFlags, os.LookupEnv)
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
	return agent.Run(ctx, &cfg)
}
