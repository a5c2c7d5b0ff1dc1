package driver

import (
	"github.com/tessera-gpu/tessera/pkg/cdi"
	"github.com/tessera-gpu/tessera/pkg/inventory"
	"github.com/tessera-gpu/tessera/pkg/isolation"
	"github.com/tessera-gpu/tessera/pkg/memlimit"
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
