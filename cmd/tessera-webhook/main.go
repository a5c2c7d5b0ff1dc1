// Command tessera-webhook is Tessera's validating admission webhook: it
// refuses ResourceClaims, ResourceClaimTemplates and DeviceClasses whose
// gpu.tessera.dev opaque config is invalid, when they are written.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tessera-gpu/tessera/internal/flagenv"
	"github.com/tessera-gpu/tessera/internal/webhook"
)

func main() {
	var cfg webhook.Config
	run := func(ctx context.Context) error { return webhook.Run(ctx, &cfg) }
	if err := flagenv.Run("tessera-webhook", os.Args[1:], &cfg, run); err != nil {
		fmt.Fprintln(os.Stderr, "tessera-webhook:", err)
		os.Exit(1)
	}
}
