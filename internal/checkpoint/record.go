package checkpoint

import "time"

// The file format: what the payload of a checkpoint file is, owned here
// so that a change to a type of another package (its fields or JSON tags)
// cannot change the file or force an upgrade step (upgrade.go). Field order
// and names are the format: encoding/json writes fields in declaration
// order, and golden_test.go holds the bytes.

// fileRecord is the payload of a checkpoint file.
type fileRecord struct {
	Version         int                     `json:"version"`
	BootID          string                  `json:"bootID,omitempty"`
	Claims          map[string]*claimRecord `json:"claims"`
	PartitionModeOn []string                `json:"partitionModeOn,omitempty"`
}

type claimRecord struct {
	UID         string         `json:"uid"`
	Namespace   string         `json:"namespace"`
	Name        string         `json:"name"`
	State       State          `json:"state"`
	Devices     []DeviceRecord `json:"devices,omitempty"`
	Updated     time.Time      `json:"updated"`
	Unconfirmed bool           `json:"unconfirmed,omitempty"`
}

// DeviceRecord is one device of a claim as the checkpoint file records it,
// and as a claim's CDI spec records it too (internal/cdi), so that a claim
// rebuilt from its spec is decoded the way a checkpoint is. Device is the
// same record in memory; RecordOf and DeviceOf convert.
type DeviceRecord struct {
	Request          string           `json:"request"`
	Pool             string           `json:"pool"`
	Device           string           `json:"device"`
	CDIDeviceIDs     []string         `json:"cdiDeviceIDs,omitempty"`
	GPUUUID          string           `json:"gpuUUID,omitempty"`
	PartitionUUID    string           `json:"partitionUUID,omitempty"`
	CreatedPartition bool             `json:"createdPartition,omitempty"`
	Profile          string           `json:"profile,omitempty"`
	Placement        *PlacementRecord `json:"placement,omitempty"`
	Sharing          *SharingRecord   `json:"sharing,omitempty"`
	ShareID          string           `json:"shareID,omitempty"`
	// NCCLTopoFile is additive and optional: a checkpoint written before
	// it (or by an agent that does not know it) decodes as false, and an
	// older agent ignores it, so it needs no version of its own.
	NCCLTopoFile bool `json:"ncclTopoFile,omitempty"`
	// VFIO is additive and optional too: absent on every device that is
	// not passed through. An agent from before it ignores it and would
	// not give such a GPU back to its driver (docs/vfio.md: before a
	// downgrade, let passthrough claims go).
	VFIO *VFIORecord `json:"vfio,omitempty"`
	// AdminAccess is additive and optional too: absent on every device
	// not allocated for admin access. An agent from before it would count
	// such a device as held (refuse its holders' prepares) until the
	// monitor's pod goes (docs/claims.md: before a downgrade).
	AdminAccess bool `json:"adminAccess,omitempty"`
}

// VFIORecord is a VFIO: a GPU passed through to a virtual machine.
type VFIORecord struct {
	Group     int                  `json:"group"`
	Functions []VFIOFunctionRecord `json:"functions"`
	Bound     bool                 `json:"bound,omitempty"`
}

// VFIOFunctionRecord is a VFIOFunction.
type VFIOFunctionRecord struct {
	Address string `json:"address"`
	Driver  string `json:"driver,omitempty"`
}

// PlacementRecord is an inventory.Placement: the memory slices a partition
// starts at and spans.
type PlacementRecord struct {
	Start int `json:"start"`
	Size  int `json:"size"`
}

// SharingRecord is a sharing.Settings. Strategy and TimeSlice are the API's
// values (v1alpha1.SharingStrategy, TimeSliceInterval) as strings.
type SharingRecord struct {
	Strategy                  string       `json:"strategy"`
	TimeSlice                 string       `json:"timeSlice,omitempty"`
	MPSActiveThreadPercentage int32        `json:"mpsActiveThreadPercentage,omitempty"`
	MPSPinnedMemoryLimit      int64        `json:"mpsPinnedMemoryLimit,omitempty"`
	Share                     *ShareRecord `json:"share,omitempty"`
}

// ShareRecord is a sharing.Share: a capacity share's consumption.
type ShareRecord struct {
	ID           string `json:"id"`
	MemoryBytes  int64  `json:"memoryBytes"`
	ComputeUnits int64  `json:"computeUnits,omitempty"`
	Enforced     bool   `json:"enforced,omitempty"`
}

// changeRecord is the payload of a log record (log.go): what one save
// changed. It has the shape of fileRecord (its claims are the claims put)
// so that upgrade.go's steps apply to it as they are, plus the UIDs
// deleted. The node-wide fields are written whole in every record.
type changeRecord struct {
	Version         int                     `json:"version"`
	BootID          string                  `json:"bootID,omitempty"`
	Claims          map[string]*claimRecord `json:"claims,omitempty"`
	Deleted         []string                `json:"deleted,omitempty"`
	PartitionModeOn []string                `json:"partitionModeOn,omitempty"`
}

// logHeader is the first line of the log: the snapshot its records follow,
// by sequence and checksum (a log is replayed only on top of that very
// snapshot).
type logHeader struct {
	Log          int    `json:"log"`
	Base         uint64 `json:"base"`
	BaseChecksum string `json:"baseChecksum"`
}
