package checkpoint

import (
	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// Conversions between the checkpoint in memory and its file records
// (record.go). Slices are shared, not copied: a record lives only as long
// as one encode or decode.

// fileOf is cp as its file records it. A save runs it on every prepare
// and unprepare over every claim held, so the claim and device records are
// carved from one allocation each rather than one per record.
func fileOf(cp *Checkpoint) fileRecord {
	f := fileRecord{Version: cp.Version, BootID: cp.BootID, PartitionModeOn: cp.PartitionModeOn, Claims: make(map[string]*claimRecord, len(cp.Claims))}
	ndev := 0
	for _, c := range cp.Claims {
		if c != nil {
			ndev += len(c.Devices)
		}
	}
	claims := make([]claimRecord, 0, len(cp.Claims))
	devs := make([]DeviceRecord, ndev)
	for uid, c := range cp.Claims {
		if c == nil {
			f.Claims[uid] = nil
			continue
		}
		claims = append(claims, claimRecord{UID: c.UID, Namespace: c.Namespace, Name: c.Name, State: c.State, Updated: c.Updated, Unconfirmed: c.Unconfirmed})
		r := &claims[len(claims)-1]
		if c.Devices != nil {
			n := len(c.Devices)
			r.Devices, devs = devs[:n:n], devs[n:]
			for i, d := range c.Devices {
				r.Devices[i] = RecordOf(d)
			}
		}
		f.Claims[uid] = r
	}
	return f
}

func (f *fileRecord) checkpoint() *Checkpoint {
	cp := &Checkpoint{Version: f.Version, BootID: f.BootID, PartitionModeOn: f.PartitionModeOn, Claims: make(map[string]*Claim, len(f.Claims))}
	for uid, c := range f.Claims {
		cp.Claims[uid] = c.claim()
	}
	return cp
}

func (r *claimRecord) claim() *Claim {
	if r == nil {
		return nil
	}
	c := &Claim{UID: r.UID, Namespace: r.Namespace, Name: r.Name, State: r.State, Updated: r.Updated, Unconfirmed: r.Unconfirmed}
	if r.Devices != nil {
		c.Devices = make([]Device, len(r.Devices))
		for i, d := range r.Devices {
			c.Devices[i] = DeviceOf(d)
		}
	}
	return c
}

// RecordOf is d as the checkpoint file and a claim's CDI spec record it.
func RecordOf(d Device) DeviceRecord {
	return DeviceRecord{
		Request: d.Request, Pool: d.Pool, Device: d.Device, CDIDeviceIDs: d.CDIDeviceIDs,
		GPUUUID: d.GPUUUID, PartitionUUID: d.PartitionUUID, CreatedPartition: d.CreatedPartition,
		Profile: d.Profile, Placement: placementRecordOf(d.Placement), Sharing: sharingRecordOf(d.Sharing), ShareID: d.ShareID,
		NCCLTopoFile: d.NCCLTopoFile, VFIO: vfioRecordOf(d.VFIO), AdminAccess: d.AdminAccess,
	}
}

// DeviceOf is the device r records.
func DeviceOf(r DeviceRecord) Device {
	return Device{
		Request: r.Request, Pool: r.Pool, Device: r.Device, CDIDeviceIDs: r.CDIDeviceIDs,
		GPUUUID: r.GPUUUID, PartitionUUID: r.PartitionUUID, CreatedPartition: r.CreatedPartition,
		Profile: r.Profile, Placement: r.Placement.placement(), Sharing: r.Sharing.settings(), ShareID: r.ShareID,
		NCCLTopoFile: r.NCCLTopoFile, VFIO: r.VFIO.vfio(), AdminAccess: r.AdminAccess,
	}
}

func vfioRecordOf(v *VFIO) *VFIORecord {
	if v == nil {
		return nil
	}
	r := &VFIORecord{Group: v.Group, Bound: v.Bound, Functions: make([]VFIOFunctionRecord, len(v.Functions))}
	for i, f := range v.Functions {
		r.Functions[i] = VFIOFunctionRecord{Address: f.Address, Driver: f.Driver}
	}
	return r
}

func (r *VFIORecord) vfio() *VFIO {
	if r == nil {
		return nil
	}
	v := &VFIO{Group: r.Group, Bound: r.Bound, Functions: make([]VFIOFunction, len(r.Functions))}
	for i, f := range r.Functions {
		v.Functions[i] = VFIOFunction{Address: f.Address, Driver: f.Driver}
	}
	return v
}

func placementRecordOf(p *inventory.Placement) *PlacementRecord {
	if p == nil {
		return nil
	}
	return &PlacementRecord{Start: p.Start, Size: p.Size}
}

func (r *PlacementRecord) placement() *inventory.Placement {
	if r == nil {
		return nil
	}
	return &inventory.Placement{Start: r.Start, Size: r.Size}
}

func sharingRecordOf(s *sharing.Settings) *SharingRecord {
	if s == nil {
		return nil
	}
	r := &SharingRecord{
		Strategy: string(s.Strategy), TimeSlice: string(s.TimeSlice),
		MPSActiveThreadPercentage: s.MPSActiveThreadPercentage, MPSPinnedMemoryLimit: s.MPSPinnedMemoryLimit,
	}
	if sh := s.Share; sh != nil {
		r.Share = &ShareRecord{ID: sh.ID, MemoryBytes: sh.MemoryBytes, ComputeUnits: sh.ComputeUnits, Enforced: sh.Enforced}
	}
	return r
}

func (r *SharingRecord) settings() *sharing.Settings {
	if r == nil {
		return nil
	}
	s := &sharing.Settings{
		Strategy: v1alpha1.SharingStrategy(r.Strategy), TimeSlice: v1alpha1.TimeSliceInterval(r.TimeSlice),
		MPSActiveThreadPercentage: r.MPSActiveThreadPercentage, MPSPinnedMemoryLimit: r.MPSPinnedMemoryLimit,
	}
	if sh := r.Share; sh != nil {
		s.Share = &sharing.Share{ID: sh.ID, MemoryBytes: sh.MemoryBytes, ComputeUnits: sh.ComputeUnits, Enforced: sh.Enforced}
	}
	return s
}
