package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// buildSpec turns a claim into its CDI spec and the IDs per device: each
// allocated device, then the claim-level devices of the whole claim and of
// each request (scope.go), each scope's vendors' common devices first and
// then s.Shared in order.
func (w *Writer) buildSpec(s ClaimSpec) (*cdispec.Spec, [][]string, error) {
	claim, devs := s.Claim, s.Devices
	if err := checkSpecInput(claim, len(devs)+len(s.Channels)); err != nil {
		return nil, nil, err
	}
	spec := newClaimSpec(claim)
	vendorIx, err := loadVendorIndex(w.vendor)
	if err != nil {
		return nil, nil, err
	}

	groups := newVendorGroups()
	scopes := requestScopes(devs)
	ids := make([][]string, len(devs), len(devs)+len(s.Channels))
	for i, d := range devs {
		dev, devIDs, err := w.claimDevice(claim, i, d, scopes[i], s.Shared, vendorIx, groups)
		if err != nil {
			return nil, nil, err
		}
		ids[i] = devIDs
		spec.Devices = append(spec.Devices, dev)
	}
	for j, c := range s.Channels {
		dev, devIDs, err := channelDevice(claim.UID, len(devs)+j, c)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, devIDs)
		spec.Devices = append(spec.Devices, dev)
	}

	shared, err := w.scopeDevices(claim.UID, "", devs, groups, s.Shared)
	if err != nil {
		return nil, nil, err
	}
	spec.Devices = append(spec.Devices, shared...)
	suffixes, scoped := scopedDevices(devs)
	for _, sfx := range suffixes {
		g := newVendorGroups()
		for i := range scoped[sfx] {
			if scoped[sfx][i].VFIO != nil {
				continue // no vendor's common device (claimDevice)
			}
			v, _ := vendors.For(scoped[sfx][i].GPU.Vendor) // known: claimDevice checked
			g.add(v, &scoped[sfx][i])
		}
		shared, err := w.scopeDevices(claim.UID, sfx, scoped[sfx], g, s.Shared)
		if err != nil {
			return nil, nil, err
		}
		spec.Devices = append(spec.Devices, shared...)
	}

	if err := setMinimumVersion(spec); err != nil {
		return nil, nil, err
	}
	return spec, ids, nil
}

// scopeDevices are the claim-level devices of one scope (scope.go): its
// vendors' common devices, then each of shared that a device of devs joins.
func (w *Writer) scopeDevices(claimUID, scope string, devs []ClaimDevice, groups *vendorGroups, shared []ClaimLevel) ([]cdispec.Device, error) {
	out, err := w.commonDevices(claimUID, scope, groups)
	if err != nil {
		return nil, err
	}
	for _, l := range shared {
		dev, ok, err := w.sharedDevice(claimUID, scope, l, devs)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, dev)
		}
	}
	return out, nil
}

// checkSpecInput rejects a claim no spec can be written for: n devices.
func checkSpecInput(claim ClaimRef, n int) error {
	if err := validateClaimUID(claim.UID); err != nil {
		return err
	}
	if n == 0 {
		// CDI rejects a spec without devices; a claim we prepare always has
		// at least one of ours.
		return errors.New("no devices")
	}
	return nil
}

// newClaimSpec is the claim's spec without devices: the annotations name
// the claim, so a spec on disk says whose it is.
func newClaimSpec(claim ClaimRef) *cdispec.Spec {
	return &cdispec.Spec{
		Kind: Kind,
		Annotations: map[string]string{
			annClaimUID:       claim.UID,
			annClaimNamespace: claim.Namespace,
			annClaimName:      claim.Name,
		},
	}
}

// vendorGroups are a claim's devices by vendor, the vendors in order of
// first appearance, so the output is deterministic.
type vendorGroups struct {
	order   []gpuvendor.Vendor
	devices map[inventory.Vendor][]gpuvendor.Device
}

func newVendorGroups() *vendorGroups {
	return &vendorGroups{devices: map[inventory.Vendor][]gpuvendor.Device{}}
}

func (g *vendorGroups) add(v gpuvendor.Vendor, d *ClaimDevice) {
	if _, ok := g.devices[d.GPU.Vendor]; !ok {
		g.order = append(g.order, v)
	}
	g.devices[d.GPU.Vendor] = append(g.devices[d.GPU.Vendor], gpuvendor.Device{Name: d.Pool + "/" + d.Device, GPU: &d.GPU, Partition: d.Partition})
}

// claimDevice is the CDI device of the claim's i-th device d and the IDs
// it is injected by, naming the claim-level devices of its request's scope
// (scope.go); it adds d to its vendor's group for the common device.
func (w *Writer) claimDevice(claim ClaimRef, i int, d ClaimDevice, scope string, shared []ClaimLevel, vendorIx *vendorIndex, groups *vendorGroups) (cdispec.Device, []string, error) {
	claimUID := claim.UID
	// A vendor Tessera does not know cannot be prepared: fail rather
	// than hand out a device without its nodes.
	v, ok := vendors.For(d.GPU.Vendor)
	if !ok {
		return cdispec.Device{}, nil, fmt.Errorf("device %s/%s: no CDI rules for vendor %q", d.Pool, d.Device, d.GPU.Vendor)
	}
	var nodes []gpuvendor.Node
	if d.VFIO == nil {
		// A passed GPU has none of its vendor's nodes (its driver let it
		// go) and shares nothing with the vendor's other devices: its
		// nodes are its effect's edits.
		var err error
		if nodes, err = v.DeviceNodes(&d.GPU, d.Partition); err != nil {
			return cdispec.Device{}, nil, fmt.Errorf("device %s/%s: %w", d.Pool, d.Device, err)
		}
		groups.add(v, &d)
	}

	name := deviceName(claimUID, i, d.Device)
	ids := deviceIDs(claimUID, name, scope, d, shared, vendorIx)

	ann := map[string]string{annVendor: string(d.GPU.Vendor)}
	if err := annotate(ann, deviceRecord(d, ids)); err != nil {
		return cdispec.Device{}, nil, fmt.Errorf("device %s/%s: %w", d.Pool, d.Device, err)
	}
	own := Edits{Nodes: gpuvendor.Paths(nodes)}
	own.Add(d.Edits)
	edits, err := w.containerEdits(own)
	if err != nil {
		return cdispec.Device{}, nil, fmt.Errorf("device %s/%s: %w", d.Pool, d.Device, err)
	}
	return cdispec.Device{Name: name, Annotations: ann, ContainerEdits: edits}, ids, nil
}

// deviceIDs are the qualified CDI IDs a container gets for d, whose own
// CDI device is name: its own, its vendor's common device, the vendor's
// spec's device when one is installed, then each claim-level device of
// shared it joins; the claim-level ones of scope, its request's ("" for the
// claim-wide ones).
func deviceIDs(claimUID, name, scope string, d ClaimDevice, shared []ClaimLevel, vendorIx *vendorIndex) []string {
	ids := []string{qualified(name)}
	if d.VFIO == nil {
		ids = append(ids, qualified(commonDeviceName(claimUID, string(d.GPU.Vendor))+scope))
		if v := vendorIx.lookup(d); v != "" {
			ids = append(ids, v)
		}
	}
	for _, l := range shared {
		if l.Joins(&d) {
			ids = append(ids, qualified(claimUID+"-"+l.Name+scope))
		}
	}
	return ids
}

// commonDevices are one device per vendor of the claim (or of one of its
// requests: scope is its suffix), with what its devices share: the
// vendor's environment and control nodes.
func (w *Writer) commonDevices(claimUID, scope string, groups *vendorGroups) ([]cdispec.Device, error) {
	var out []cdispec.Device
	for _, v := range groups.order {
		env, err := v.CommonEnv(groups.devices[v.Name()])
		if err != nil {
			return nil, err
		}
		devNodes, err := w.deviceNodes(gpuvendor.Paths(v.CommonNodes()))
		if err != nil {
			return nil, fmt.Errorf("%s common nodes: %w", v.Name(), err)
		}
		out = append(out, cdispec.Device{
			Name:           commonDeviceName(claimUID, string(v.Name())) + scope,
			Annotations:    map[string]string{annVendor: string(v.Name())},
			ContainerEdits: cdispec.ContainerEdits{Env: env, DeviceNodes: devNodes},
		})
	}
	return out, nil
}

// setMinimumVersion gives spec the lowest version that expresses it, so
// that runtimes with older CDI libraries accept it.
func setMinimumVersion(spec *cdispec.Spec) error {
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI version: %w", err)
	}
	spec.Version = v
	return nil
}

// deviceNodes maps /dev-relative paths to CDI device nodes: the container
// sees the real path, the host node lives under the device root.
func (w *Writer) deviceNodes(rel []string) ([]*cdispec.DeviceNode, error) {
	out := make([]*cdispec.DeviceNode, 0, len(rel))
	for _, p := range rel {
		n := &cdispec.DeviceNode{
			Path:     "/dev/" + p,
			HostPath: filepath.Join(w.devRoot, p),
		}
		// Explicit numbers make the node resolvable where the host file is
		// not a real device (the simulator). GPU nodes are all character
		// devices.
		if w.numbers != nil {
			if major, minor, ok := w.numbers(p); ok {
				// CDI reads major 0 as "not given" and falls back to
				// stat'ing the host node, which is exactly what explicit
				// numbers are meant to avoid: fail here, not at container
				// start.
				if major <= 0 || minor < 0 {
					return nil, fmt.Errorf("device numbers %d:%d for /dev/%s are not usable in a CDI spec", major, minor, p)
				}
				n.Type, n.Major, n.Minor = "c", major, minor
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// marshalSpec encodes spec as the CDI library writes specs itself:
// compact JSON (pipe through jq to read one).
func marshalSpec(spec *cdispec.Spec) ([]byte, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return append(data, '\n'), nil
}
