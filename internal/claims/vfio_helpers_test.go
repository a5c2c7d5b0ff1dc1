package claims

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// passthroughEnv is a node whose agent passes GPUs through.
func passthroughEnv(t *testing.T, profile string) *env {
	e := newEnv(t, profile)
	e.passthrough = true
	return e
}

// vfioClaim is allocated(name, devices...) asked through the vfio class.
func vfioClaim(name string, devices ...string) *resourceapi.ResourceClaim {
	c := allocated(name, devices...)
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: names.VFIOClass}}}
	return c
}

// simPassed is what the agent's publisher gets from the manager's
// Passed: the GPUs the node's sysfs shows off their host driver.
func simPassed(t testing.TB, b *sim.Backend) []publish.PassedGPU {
	var out []publish.PassedGPU
	for _, g := range b.Machine().Node.GPUs {
		d, err := vfio.DriverOf(b.PCISysfs(), g.PCIBusID)
		if err != nil {
			t.Fatal(err)
		}
		if d != vendors.Capabilities(g.Vendor).HostDriver {
			out = append(out, publish.PassedGPU{UUID: g.UUID, PCIBusID: g.PCIBusID, Vendor: g.Vendor})
		}
	}
	return out
}

// driverIs checks the driver every function d records is on, and whether
// its group's node is there.
func (e *env) driverIs(d checkpoint.Device, want string, node bool) error {
	if d.VFIO == nil {
		return fmt.Errorf("device %s has no passthrough record", d.Device)
	}
	for _, f := range d.VFIO.Functions {
		got, err := vfio.DriverOf(e.sim.PCISysfs(), f.Address)
		if err != nil {
			return err
		}
		if want == "host" {
			want = f.Driver
		}
		if got != want {
			return fmt.Errorf("%s on %q, want %q", f.Address, got, want)
		}
	}
	_, err := os.Stat(filepath.Join(e.sim.DevRoot(), vfio.GroupNode(d.VFIO.Group)))
	if (err == nil) != node {
		return fmt.Errorf("group %d's node there: %v, want %v", d.VFIO.Group, err == nil, node)
	}
	return nil
}

// gpuDriver is the driver of the GPU named device (gpu-<n>) as first
// published.
func (e *env) gpuDriver(res *publish.Result, device string) string {
	e.t.Helper()
	d, err := vfio.DriverOf(e.sim.PCISysfs(), res.Devices[device].GPU.PCIBusID)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// onDrivers fails unless every GPU of the machine is on its host driver
// and no group node is left.
func (e *env) onDrivers(t *testing.T) {
	t.Helper()
	if p := simPassed(t, e.sim); len(p) != 0 {
		t.Errorf("GPUs off their drivers: %+v", p)
	}
	if nodes, _ := filepath.Glob(filepath.Join(e.sim.DevRoot(), "vfio", "[0-9]*")); len(nodes) != 0 {
		t.Errorf("group nodes left: %v", nodes)
	}
}
