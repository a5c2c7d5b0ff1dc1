package cdi

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// A claim spec records each allocated device as the checkpoint does, a
// checkpoint.DeviceRecord, so that a claim rebuilt from its spec is decoded
// as its checkpoint entry would be. The spec holds what is known when it is
// written (no carve: recovery finds that in the published devices), one
// annotation a field, the sharing settings as the record's JSON.

// Checkpoint is what is known of d before anything is done for it (no CDI
// IDs, no carve): the checkpoint's record of it, which prepare fills in,
// and what its spec records.
func (d ClaimDevice) Checkpoint() checkpoint.Device {
	dev := checkpoint.Device{Request: d.Request, Pool: d.Pool, Device: d.Device, GPUUUID: d.GPU.UUID, Sharing: d.Sharing, ShareID: d.ShareID, NCCLTopoFile: d.NCCLTopoFile, VFIO: d.VFIO, AdminAccess: d.AdminAccess}
	if d.Partition != nil {
		dev.PartitionUUID = d.Partition.UUID
	}
	return dev
}

// deviceRecord is what the spec records of d, given its CDI device IDs.
func deviceRecord(d ClaimDevice, ids []string) checkpoint.DeviceRecord {
	dev := d.Checkpoint()
	dev.CDIDeviceIDs = ids
	return checkpoint.RecordOf(dev)
}

// annotate writes rec into a spec device's annotations.
func annotate(ann map[string]string, rec checkpoint.DeviceRecord) error {
	ann[annRequest] = rec.Request
	ann[annPool] = rec.Pool
	ann[annDevice] = rec.Device
	ann[annGPUUUID] = rec.GPUUUID
	ann[annCDIDeviceIDs] = strings.Join(rec.CDIDeviceIDs, ",")
	if rec.PartitionUUID != "" {
		ann[annPartitionUUID] = rec.PartitionUUID
	}
	if rec.ShareID != "" {
		ann[annShareID] = rec.ShareID
	}
	if rec.NCCLTopoFile {
		ann[annNCCLTopoFile] = "true"
	}
	if rec.AdminAccess {
		ann[annAdminAccess] = "true"
	}
	if rec.Sharing != nil {
		js, err := json.Marshal(rec.Sharing)
		if err != nil {
			return fmt.Errorf("sharing: %w", err)
		}
		ann[annSharing] = string(js)
	}
	if rec.VFIO != nil {
		js, err := json.Marshal(rec.VFIO)
		if err != nil {
			return fmt.Errorf("vfio: %w", err)
		}
		ann[annVFIO] = string(js)
	}
	return nil
}

// recordOf reads back what annotate wrote; ok is false for a device that
// records none (a common device).
func recordOf(ann map[string]string) (rec checkpoint.DeviceRecord, ok bool, err error) {
	if _, ok := ann[annDevice]; !ok {
		return rec, false, nil
	}
	rec = checkpoint.DeviceRecord{
		Request:       ann[annRequest],
		Pool:          ann[annPool],
		Device:        ann[annDevice],
		GPUUUID:       ann[annGPUUUID],
		PartitionUUID: ann[annPartitionUUID],
		ShareID:       ann[annShareID],
		NCCLTopoFile:  ann[annNCCLTopoFile] == "true",
		AdminAccess:   ann[annAdminAccess] == "true",
	}
	if s := ann[annCDIDeviceIDs]; s != "" {
		rec.CDIDeviceIDs = strings.Split(s, ",")
	}
	if js, ok := ann[annSharing]; ok {
		rec.Sharing = &checkpoint.SharingRecord{}
		if err := json.Unmarshal([]byte(js), rec.Sharing); err != nil {
			return rec, true, fmt.Errorf("sharing annotation: %w", err)
		}
	}
	if js, ok := ann[annVFIO]; ok {
		rec.VFIO = &checkpoint.VFIORecord{}
		if err := json.Unmarshal([]byte(js), rec.VFIO); err != nil {
			return rec, true, fmt.Errorf("vfio annotation: %w", err)
		}
	}
	return rec, true, nil
}
