package sharing

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// ResolveTopology reports for each device in devs whether the claim's
// containers get an NCCL topology file of it (topology.ncclTopoFile,
// docs/training.md), picking each device's config by the rule Resolve
// uses: the last config for its request and device type, the claim's over
// its class's.
//
// The file describes, and CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES
// lists, the claim's GPUs, so a claim asking for it must be GPUs the file
// can describe: every device asks (a device left out would be hidden from
// CUDA or HIP by the variable), every device is a whole GPU (not a
// partition, not a capacity share), all of one vendor. Anything else is
// refused, naming the config: a request is never accepted and ignored.
// A claim of one GPU asks for nothing to be done (the API's rule) and gets
// false.
func ResolveTopology(driver string, allocConfigs []resourceapi.DeviceAllocationConfiguration, devs []Device) ([]bool, error) {
	cfgs, err := decodeAll(driver, allocConfigs)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(devs))
	var asking *config
	var askers, others []string
	for i, d := range devs {
		// A config of the other device type is Resolve's error to report.
		c, _ := pickFor(cfgs, d)
		if c != nil && c.obj.GetTopology() != nil && c.obj.GetTopology().NCCLTopoFile {
			out[i] = true
			asking = c
			askers = append(askers, d.Name)
			continue
		}
		others = append(others, d.Name)
	}
	if asking == nil {
		return out, nil
	}
	if len(devs) < 2 {
		// One device: no peers to describe (the API's documented no-op).
		return make([]bool, len(devs)), nil
	}
	field := asking.field("topology.ncclTopoFile")
	if len(others) > 0 {
		return nil, fmt.Errorf("%s: devices %v ask for an NCCL topology file and %v do not: the file and CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES name the claim's GPUs, and a GPU left out would be hidden from CUDA and HIP; ask for it for every request of the claim, or split the claim", field, askers, others)
	}
	var vendors []inventory.Vendor
	for _, d := range devs {
		switch {
		case d.Partition:
			return nil, fmt.Errorf("%s: device %s is a partition; an NCCL topology file describes whole GPUs only", field, d.Name)
		case d.Share != nil:
			return nil, fmt.Errorf("%s: device %s is a capacity share (%s) of a GPU; an NCCL topology file describes whole GPUs only: ask for the whole device", field, d.Name, d.Share)
		case !hasCollective(d.Vendor):
			return nil, fmt.Errorf("%s: device %s is a %s GPU, which no collective library reads a topology file for", field, d.Name, d.Vendor)
		}
		if !slices.Contains(vendors, d.Vendor) {
			vendors = append(vendors, d.Vendor)
		}
	}
	if len(vendors) > 1 {
		return nil, fmt.Errorf("%s: the claim's GPUs are of two vendors (%v); NCCL and RCCL each see only their own: use one claim per vendor", field, vendors)
	}
	return out, nil
}

// pickFor is the config that applies to d: the last one for its request
// and device type (nil: none). A config naming d's request for the other
// device type applies to nothing and is the error (the first such);
// a catch-all config for the other type is skipped silently.
func pickFor(cfgs []config, d Device) (*config, error) {
	want := "gpu"
	if d.Partition {
		want = "partition"
	}
	var pick *config
	var mismatch error
	for i := range cfgs {
		c := &cfgs[i]
		if !c.appliesTo(d.Request) {
			continue
		}
		if c.obj.DeviceType() != want {
			if len(c.requests) > 0 && mismatch == nil {
				mismatch = fmt.Errorf("%s: kind %s is for devices of type %q, but this device is a %s", c.field("kind"), c.obj.GetKind(), c.obj.DeviceType(), want)
			}
			continue
		}
		pick = c
	}
	return pick, mismatch
}

// hasCollective reports whether a collective library reads a topology
// file for the vendor's GPUs.
func hasCollective(v inventory.Vendor) bool {
	gv, ok := vendors.For(v)
	return ok && gv.Collective() != nil
}
