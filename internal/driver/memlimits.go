package driver

import (
	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/memlimit/nvmllimit"
)

// memoryLimits is how the claims' specs hold shares in the kernel: the
// hook, where the node has it installed, and at a claim's unprepare the
// release of the limits its containers held whose poststop hook never
// ran. Which devices get the hook is the same assessment that published
// them memoryIsolation=kernel (claims.Config.Isolation), so a share of a
// device published kernel always gets it.
func (o *Options) memoryLimits() *claims.MemoryLimits {
	if !o.Host.HookInstalled {
		return nil
	}
	h := o.Host.Hook
	return &claims.MemoryLimits{Hook: h, Release: func(uid string) error {
		return memlimit.ReleaseClaim(h, uid, memlimit.Env{NVML: nvmllimit.New()})
	}}
}
