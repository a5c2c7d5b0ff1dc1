package claims

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/pkg/cdi"
	"github.com/tessera-gpu/tessera/pkg/checkpoint"
)

// resolve maps the claim's allocation results for this driver to inventory
// devices. Any device this node does not publish fails the claim, naming it.
func (m *Manager) resolve(claim *resourceapi.ResourceClaim) ([]cdi.ClaimDevice, error) {
	if claim.Status.Allocation == nil {
		return nil, ErrNotAllocated
	}
	if err := checkConfig(claim, m.cfg.DriverName); err != nil {
		return nil, err
	}
	pub := m.cfg.Devices()
	var out []cdi.ClaimDevice
	var missing []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != m.cfg.DriverName {
			continue
		}
		e, ok := pub.Devices[r.Device]
		if r.Pool != pub.Pool || !ok {
			missing = append(missing, fmt.Sprintf("%s/%s (request %q)", r.Pool, r.Device, r.Request))
			continue
		}
		out = append(out, cdi.ClaimDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, GPU: *e.GPU, Partition: e.Partition})
	}
	if len(missing) > 0 {
		return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("allocated device(s) not on this node (pool %s): %s", pub.Pool, strings.Join(missing, ", ")))
	}
	return out, nil
}

// resolveRecorded maps a checkpointed claim's devices back to the inventory.
func (m *Manager) resolveRecorded(c *checkpoint.Claim) ([]cdi.ClaimDevice, error) {
	pub := m.cfg.Devices()
	out := make([]cdi.ClaimDevice, 0, len(c.Devices))
	for _, d := range c.Devices {
		e, ok := pub.Devices[d.Device]
		if !ok || d.Pool != pub.Pool {
			return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("prepared device %s/%s is no longer on this node", d.Pool, d.Device))
		}
		out = append(out, cdi.ClaimDevice{Request: d.Request, Pool: d.Pool, Device: d.Device, GPU: *e.GPU, Partition: e.Partition})
	}
	return out, nil
}

// checkConflicts is the driver's last line of defence against handing one
// device to two claims: a device, or a GPU and one of its partitions, may
// belong to only one prepared claim.
func (m *Manager) checkConflicts(ref cdi.ClaimRef, devs []cdi.ClaimDevice) error {
	holds := map[string]string{} // physical unit -> "ns/name (device)"
	for uid, c := range m.cp.Claims {
		if uid == ref.UID {
			continue
		}
		for _, d := range c.Devices {
			holds[unitKey(d.GPUUUID, d.PartitionUUID)] = fmt.Sprintf("%s/%s (device %s)", c.Namespace, c.Name, d.Device)
			if d.PartitionUUID != "" {
				holds[unitKey(d.GPUUUID, "*")] = fmt.Sprintf("%s/%s (device %s)", c.Namespace, c.Name, d.Device)
			}
		}
	}
	var conflicts []string
	for _, d := range devs {
		keys := []string{unitKey(d.GPU.UUID, "")}
		if d.Partition != nil {
			keys = []string{unitKey(d.GPU.UUID, d.Partition.UUID), unitKey(d.GPU.UUID, "")}
		} else {
			keys = append(keys, unitKey(d.GPU.UUID, "*"))
		}
		for _, k := range keys {
			if owner, ok := holds[k]; ok {
				conflicts = append(conflicts, fmt.Sprintf("device %s is in use by claim %s", d.Device, owner))
				break
			}
		}
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return withKind(ErrDeviceInUse, errors.New(strings.Join(conflicts, "; ")))
	}
	return nil
}

func unitKey(gpu, part string) string { return gpu + "/" + part }

func specExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkConfig rejects opaque configuration addressed to this driver: this
// version defines no parameters, and silently ignoring them would run the
// workload with settings its author did not get.
func checkConfig(claim *resourceapi.ResourceClaim, driver string) error {
	for i, c := range claim.Status.Allocation.Devices.Config {
		if c.Opaque == nil || c.Opaque.Driver != driver {
			continue
		}
		return withKind(ErrConfigRejected, fmt.Errorf("status.allocation.devices.config[%d].opaque: this version of %s defines no %s/%s configuration kinds (requests %v)", i, driver, v1alpha1.Group, v1alpha1.Version, c.Requests))
	}
	return nil
}
