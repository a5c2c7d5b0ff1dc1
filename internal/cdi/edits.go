package cdi

import (
	"fmt"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// A claim's spec is assembled from what its owners return, as the example
// driver's profiles return their container edits: each GPU vendor its
// device nodes and environment (gpuvendor.Vendor), each of the claims
// package's effects what it set up on the node (an MPS daemon's pipe
// directory and variables, a memory limit's hooks), the NCCL topology file
// its mount and variables. This package knows none of them: it names the
// CDI devices, records each allocated device, orders the IDs, validates
// the spec and writes it.

// Edits is what one owner adds to a container. Device nodes are named
// relative to /dev ("nvidia0", "dri/renderD128"): the writer places them
// under its device root and gives them their numbers.
type Edits struct {
	Env    []string
	Nodes  []string
	Mounts []*cdispec.Mount
	Hooks  []*cdispec.Hook
}

// ClaimLevel is a CDI device of the claim that every container using one
// of the devices that join it gets once, whatever else it gets (its vendor
// annotation is its first device's vendor): written
// for the whole claim and, in a claim of several requests, once per
// request (scope.go), from just the devices of that scope that join it.
type ClaimLevel struct {
	// Name names the device in the claim: its CDI name is
	// "<claim UID>-<Name>[-r<k>]". It must start with a letter, so that it
	// cannot collide with an allocated device's name (deviceName), and is
	// one of claimLevelNames, so that WholeClaimIDs knows it.
	Name string
	// Joins reports whether a container using d gets this device.
	Joins func(d *ClaimDevice) bool
	// Edits are its edits for devs, the scope's devices that join it, in
	// claim order; never called with none.
	Edits func(devs []ClaimDevice) (Edits, error)
}

// ClaimSpec is everything a claim's spec is written from.
type ClaimSpec struct {
	Claim ClaimRef
	// Devices are the allocated devices in claim order, each with the
	// edits its owners gave its own CDI device (after its vendor's nodes).
	Devices []ClaimDevice
	// Shared are the claim-level devices beside each vendor's common one,
	// in the order a device's IDs name them.
	Shared []ClaimLevel
	// File, when set, is a file the spec mounts (the claim's NCCL topology
	// file, at TopologyPath): written before the spec, removed after it.
	File []byte
	// Channels are the claim's devices that are no GPU, after Devices in
	// claim order (channel.go).
	Channels []Channel
}

// Add appends o's edits to e.
func (e *Edits) Add(o Edits) {
	e.Env = append(e.Env, o.Env...)
	e.Nodes = append(e.Nodes, o.Nodes...)
	e.Mounts = append(e.Mounts, o.Mounts...)
	e.Hooks = append(e.Hooks, o.Hooks...)
}

// containerEdits turns e into the spec's form, its nodes under the
// writer's device root.
func (w *Writer) containerEdits(e Edits) (cdispec.ContainerEdits, error) {
	nodes, err := w.deviceNodes(e.Nodes)
	if err != nil {
		return cdispec.ContainerEdits{}, err
	}
	if len(nodes) == 0 {
		nodes = nil
	}
	return cdispec.ContainerEdits{Env: e.Env, DeviceNodes: nodes, Mounts: e.Mounts, Hooks: e.Hooks}, nil
}

// sharedDevice is the claim-level device l for scope (a request's suffix,
// "" for the whole claim) from devs, the scope's devices; ok is false when
// none of them joins it.
func (w *Writer) sharedDevice(claimUID, scope string, l ClaimLevel, devs []ClaimDevice) (dev cdispec.Device, ok bool, err error) {
	var in []ClaimDevice
	for i := range devs {
		if l.Joins(&devs[i]) {
			in = append(in, devs[i])
		}
	}
	if len(in) == 0 {
		return dev, false, nil
	}
	e, err := l.Edits(in)
	if err != nil {
		return dev, false, err
	}
	ce, err := w.containerEdits(e)
	if err != nil {
		return dev, false, fmt.Errorf("%s: %w", l.Name, err)
	}
	return cdispec.Device{
		Name:           claimUID + "-" + l.Name + scope,
		Annotations:    map[string]string{annVendor: string(in[0].GPU.Vendor)},
		ContainerEdits: ce,
	}, true, nil
}
