package driver

import (
	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/memlimit/nvmllimit"
)

// kernelLimits is how the claims' CDI specs hold shares in the kernel: by
// the same assessment that published the device memoryIsolation=kernel, so
// a share of a device published kernel always gets its hook.
func (o *Options) kernelLimits() *cdi.KernelLimits {
	if !o.Host.HookInstalled {
		return nil
	}
	return &cdi.KernelLimits{Hook: o.Host.Hook, For: func(g *inventory.GPU, p *inventory.Partition) (memlimit.Mechanism, string, bool) {
		a := o.isolation(g, p)
		return a.Mechanism, a.Region, a.Level == isolation.Kernel
	}}
}

// releaseMemoryLimits forgets, at a claim's unprepare, the limits its
// containers held whose poststop hook never ran; nil where no hook runs.
func (o *Options) releaseMemoryLimits() func(claimUID string) error {
	if !o.Host.HookInstalled {
		return nil
	}
	h := o.Host.Hook
	return func(uid string) error {
		return memlimit.ReleaseClaim(h, uid, memlimit.Env{NVML: nvmllimit.New()})
	}
}
