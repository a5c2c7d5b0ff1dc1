package claims

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Admin access (DRA's adminAccess, the DRAAdminAccess gate): a request with
// adminAccess: true, which the API server admits only in a namespace
// labelled resource.kubernetes.io/admin-access: "true", is allocated
// devices whether or not other claims hold them. Such a claim is a
// monitor's (dcgm-exporter, amd-smi, a profiler): it gets the devices'
// nodes to read, and nothing else. So an admin-access device
//
//   - changes nothing on the node: no effect plans for it (no carve, no
//     MIG mode switch, no passthrough, no interval, no MPS daemon, no
//     memory limit), and a config or class that would change it is
//     refused (checkAdmin);
//   - holds nothing for the agent: it is recorded (checkpoint.Device's
//     AdminAccess) but no conflict, share, partition, passthrough or
//     stale-claim check counts it, so the claims it watches prepare and
//     unprepare as if it were not there, and its own unprepare removes
//     its spec and its entry and touches nothing they hold.
//
// A claim may mix admin-access requests with ordinary ones: each device is
// one or the other.

// adminResult reports whether an allocation result is for admin access.
func adminResult(r resourceapi.DeviceRequestAllocationResult) bool {
	return r.AdminAccess != nil && *r.AdminAccess
}

// holdingOnly returns devs without the admin-access ones: what the checks
// against other claims and the effects look at.
func holdingOnly(devs []planned) []planned {
	if !slices.ContainsFunc(devs, func(p planned) bool { return p.dev.AdminAccess }) {
		return devs
	}
	out := make([]planned, 0, len(devs))
	for _, p := range devs {
		if !p.dev.AdminAccess {
			out = append(out, p)
		}
	}
	return out
}

// holding reports whether a recorded device holds what it names for other
// claims: any but an admin-access one.
func holding(d checkpoint.Device) bool { return !d.AdminAccess }

// watch makes p, allocated for admin access from published entry e, a
// device to watch as it is: a dynamic placement is the slice a holder
// carved there (refused when there is none: a monitor carves nothing),
// and a capacity share is the whole device, with no share of its own
// (the scheduler counts no capacity for admin access).
func watch(p *planned, e publish.Entry) error {
	p.share = nil
	if p.carve == nil {
		return nil
	}
	if e.Partition == nil {
		return withKind(ErrConfigRejected, fmt.Errorf("device %s is a MIG placement (%s at %d) where no slice is carved: admin access watches what other claims hold, and carves nothing",
			p.dev.Device, p.carve.Profile, p.carve.Placement.Start))
	}
	p.dev.Partition, p.carve = e.Partition, nil
	return nil
}

// checkAdmin refuses, naming the request and the field (Prepare's error
// names the claim), an admin-access
// request that would change its devices: one of the passthrough class
// (the GPU would leave its holders for a virtual machine), or one a config
// of this driver applies to (time slicing, MPS, a topology file: settings
// the monitor would impose on the holders' GPU). The configs are checked
// before they are resolved, so that the refusal is this one and not a
// sharing error about a device the claim only watches.
func (m *Manager) checkAdmin(claim *resourceapi.ResourceClaim, devs []planned) error {
	var errs []error
	seen := map[string]bool{}
	for _, p := range devs {
		req := p.dev.Request
		if !p.dev.AdminAccess || seen[req] {
			continue
		}
		seen[req] = true
		if p.passthrough {
			errs = append(errs, fmt.Errorf("request %q has adminAccess, but its class %s (spec.devices.requests[%s].deviceClassName) passes the GPU through to a virtual machine, which takes it from the claims that hold it: admin access only watches",
				req, names.VFIOClass, req))
		}
		for i, c := range claim.Status.Allocation.Devices.Config {
			if c.Opaque == nil || c.Opaque.Driver != m.cfg.DriverName || !configFor(c.Requests, req) {
				continue
			}
			errs = append(errs, fmt.Errorf("request %q has adminAccess, but status.allocation.devices.config[%d] (from %s) of driver %s applies to it: a config would change the device for the claims that hold it (sharing, MPS, limits, a topology file), and admin access only watches: drop the config or address it to other requests",
				req, i, strings.ToLower(strings.TrimPrefix(string(c.Source), "From")), m.cfg.DriverName))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return withKind(ErrConfigRejected, err)
	}
	return nil
}

// configFor reports whether a config addressed to requests (none: all)
// applies to request ("req" or "req/sub").
func configFor(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	return slices.Contains(requests, request) || slices.Contains(requests, parent)
}
