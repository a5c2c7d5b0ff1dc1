package driver

import "github.com/tessera-gpu/tessera/internal/metrics"

// sharedDevices is the metrics' view of the multi-allocatable devices:
// what each offers (published) and what prepared claims hold (checkpoint).
func (d *Driver) sharedDevices() []metrics.SharedDevice {
	pub := d.Published()
	if pub == nil {
		return nil
	}
	use := d.claims.SharedUse()
	var out []metrics.SharedDevice
	for _, name := range pub.Order {
		e := pub.Devices[name]
		if e.Shared == nil {
			continue
		}
		u := use[name]
		sd := metrics.SharedDevice{Device: name, MemoryBytes: e.Shared.MemoryBytes, ComputeUnits: e.Shared.ComputeUnits,
			AllocatedMemoryBytes: u.MemoryBytes, AllocatedComputeUnits: u.ComputeUnits, Shares: u.Shares,
			MemoryIsolation: string(d.opts.isolation(e.GPU, e.Partition).Level)}
		if u.Whole {
			sd.AllocatedMemoryBytes, sd.AllocatedComputeUnits = e.Shared.MemoryBytes, e.Shared.ComputeUnits
		}
		out = append(out, sd)
	}
	return out
}
