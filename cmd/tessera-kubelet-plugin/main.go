// Command tessera-kubelet-plugin is Tessera's node agent: it publishes the
// node's GPUs as ResourceSlices and prepares claims for the kubelet.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tessera-gpu/tessera/internal/agent"
	"github.com/tessera-gpu/tessera/internal/flagenv"
	"github.com/tessera-gpu/tessera/internal/uninstall"
)

func main() {
	// `uninstall <step>`: what the chart's uninstall hooks run
	// (internal/uninstall).
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		if err := uninstall.Main(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "tessera-kubelet-plugin uninstall:", err)
			os.Exit(1)
		}
		return
	}
	var cfg agent.Config
	run := func(ctx context.Context) error { return agent.Run(ctx, &cfg) }
	if err := flagenv.Run("tessera-kubelet-plugin", os.Args[1:], &cfg, run); err != nil {
		fmt.Fprintln(os.Stderr, "tessera-kubelet-plugin:", err)
		os.Exit(1)
	}
}
