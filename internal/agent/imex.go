package agent

import (
	"fmt"
	"os"

	"github.com/tessera-gpu/tessera/internal/channelpool"
)

// validateIMEX checks --imex-channels and fills --imex-namespace from the
// agent's pod's namespace.
func (c *Config) validateIMEX() error {
	if c.IMEXChannels == 0 {
		return nil
	}
	if c.IMEXChannels < 0 || c.IMEXChannels > channelpool.MaxChannels {
		return fmt.Errorf("--imex-channels=%d: want 0 (none) or 1 to %d", c.IMEXChannels, channelpool.MaxChannels)
	}
	if c.IMEXNamespace == "" {
		c.IMEXNamespace = os.Getenv("POD_NAMESPACE")
	}
	if c.IMEXNamespace == "" {
		return fmt.Errorf("--imex-namespace (or POD_NAMESPACE) is required with --imex-channels")
	}
	return nil
}
