package cdi

import (
	"fmt"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// Channel is a device of a claim that is no GPU: an IMEX channel of a
// multi-node NVLink domain (internal/channelpool). Its one edit is its
// device node, which the runtime creates in the container: the driver
// makes no node on the host.
type Channel struct {
	Request      string
	Pool, Device string
	Node         *cdispec.DeviceNode
}

// Checkpoint is the checkpoint's record of c before its IDs are known.
func (c Channel) Checkpoint() checkpoint.Device {
	return checkpoint.Device{Request: c.Request, Pool: c.Pool, Device: c.Device}
}

// channelDevice is the CDI device of channel c, the claim's i-th device,
// and the one ID it is injected by: it joins no vendor's common device.
func channelDevice(claimUID string, i int, c Channel) (cdispec.Device, []string, error) {
	if c.Node == nil || c.Node.Path == "" || c.Node.Type != "c" {
		return cdispec.Device{}, nil, fmt.Errorf("device %s/%s: no character device node", c.Pool, c.Device)
	}
	name := deviceName(claimUID, i, c.Device)
	ids := []string{qualified(name)}
	rec := c.Checkpoint()
	rec.CDIDeviceIDs = ids
	ann := map[string]string{}
	if err := annotate(ann, checkpoint.RecordOf(rec)); err != nil {
		return cdispec.Device{}, nil, fmt.Errorf("device %s/%s: %w", c.Pool, c.Device, err)
	}
	node := *c.Node
	return cdispec.Device{Name: name, Annotations: ann, ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{&node}}}, ids, nil
}
