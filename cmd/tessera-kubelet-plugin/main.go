// Command tessera-kubelet-plugin is Tessera's node agent: it publishes the
// node's GPUs as ResourceSlices and prepares claims for the kubelet.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tessera-gpu/tessera/internal/agent"
	"github.com/tessera-gpu/tessera/internal/flagenv"
)

func main() {
	var cfg agent.Config
	run := func(ctx context.Context) error { return agent.Run(ctx, &cfg) }
	if err := flagenv.Run("tessera-kubelet-plugin", os.Args[1:], &cfg, run); err != nil {
		fmt.Fprintln(os.Stderr, "tessera-kubelet-plugin:", err)
		os.Exit(1)
	}
}
