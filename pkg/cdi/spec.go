package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/pkg/gpuvendor"
	"github.com/tessera-gpu/tessera/pkg/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/pkg/inventory"
)

// buildSpec turns a claim into its CDI spec and the IDs per device.
func (w *Writer) buildSpec(claim ClaimRef, devs []ClaimDevice) (*cdispec.Spec, [][]string, error) {
	if err := validateClaimUID(claim.UID); err != nil {
		return nil, nil, err
	}
	if len(devs) == 0 {
		// CDI rejects a spec without devices; a claim we prepare always has
		// at least one of ours.
		return nil, nil, errors.New("no devices")
	}

	spec := &cdispec.Spec{
		Kind: Kind,
		Annotations: map[string]string{
			annClaimUID:       claim.UID,
			annClaimNamespace: claim.Namespace,
			annClaimName:      claim.Name,
		},
	}

	vendorIx, err := loadVendorIndex(w.vendor)
	if err != nil {
		return nil, nil, err
	}

	// Vendors in order of first appearance, so the output is deterministic.
	var vendorOrder []gpuvendor.Vendor
	byVendor := map[inventory.Vendor][]gpuvendor.Device{}
	ids := make([][]string, len(devs))
	for i, d := range devs {
		// A vendor Tessera does not know cannot be prepared: fail rather
		// than hand out a device without its nodes.
		v, ok := vendors.For(d.GPU.Vendor)
		if !ok {
			return nil, nil, fmt.Errorf("device %s/%s: no CDI rules for vendor %q", d.Pool, d.Device, d.GPU.Vendor)
		}
		nodes, err := v.DeviceNodes(&d.GPU, d.Partition)
		if err != nil {
			return nil, nil, fmt.Errorf("device %s/%s: %w", d.Pool, d.Device, err)
		}
		if _, ok := byVendor[d.GPU.Vendor]; !ok {
			vendorOrder = append(vendorOrder, v)
		}
		byVendor[d.GPU.Vendor] = append(byVendor[d.GPU.Vendor], gpuvendor.Device{Name: d.Pool + "/" + d.Device, GPU: &d.GPU, Partition: d.Partition})

		name := deviceName(claim.UID, i, d.Device)
		common := qualified(commonDeviceName(claim.UID, string(d.GPU.Vendor)))
		ids[i] = []string{qualified(name), common}
		if v := vendorIx.lookup(d); v != "" {
			ids[i] = append(ids[i], v)
		}
		if d.Sharing.IsMPS() {
			ids[i] = append(ids[i], qualified(mpsDeviceName(claim.UID)))
		}

		ann := map[string]string{annVendor: string(d.GPU.Vendor)}
		if err := annotate(ann, deviceRecord(d, ids[i])); err != nil {
			return nil, nil, fmt.Errorf("device %s/%s: %w", d.Pool, d.Device, err)
		}
		devNodes, err := w.deviceNodes(gpuvendor.Paths(nodes))
		if err != nil {
			return nil, nil, fmt.Errorf("device %s/%s: %w", d.Pool, d.Device, err)
		}
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name:           name,
			Annotations:    ann,
			ContainerEdits: cdispec.ContainerEdits{DeviceNodes: devNodes},
		})
	}

	for _, v := range vendorOrder {
		env, err := v.CommonEnv(byVendor[v.Name()])
		if err != nil {
			return nil, nil, err
		}
		devNodes, err := w.deviceNodes(gpuvendor.Paths(v.CommonNodes()))
		if err != nil {
			return nil, nil, fmt.Errorf("%s common nodes: %w", v.Name(), err)
		}
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name:           commonDeviceName(claim.UID, string(v.Name())),
			Annotations:    map[string]string{annVendor: string(v.Name())},
			ContainerEdits: cdispec.ContainerEdits{Env: env, DeviceNodes: devNodes},
		})
	}

	mps, err := mpsDevice(claim.UID, devs)
	if err != nil {
		return nil, nil, err
	}
	if mps != nil {
		spec.Devices = append(spec.Devices, *mps)
	}

	// The lowest version that expresses the spec, so that runtimes with
	// older CDI libraries accept it.
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("CDI version: %w", err)
	}
	spec.Version = v
	return spec, ids, nil
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
