//go:build cgo && linux

package nvml

import (
	"errors"
	"fmt"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// MIG, as the NVIDIA MIG user guide describes it: a GPU has 8 memory slices
// and 7 compute slices; a GPU instance (GI) takes a profile at a placement
// on the memory slices; compute instances (CI) split a GI's SMs. What a
// container opens is a MIG device: one CI of one GI, with its own MIG- UUID.

const mib = 1 << 20

// giProfile is one row of the GPU's GI profile table as NVML reports it.
type giProfile struct {
	info nvml.GpuInstanceProfileInfo
	name string
}

// errNoMIG: the GPU has no MIG (nvmlDeviceGetMigMode answers NOT_SUPPORTED),
// an answer rather than a fault.
var errNoMIG = errors.New("the GPU does not support MIG")

// mig fills the GPU's partitioning. A GPU without MIG has none. A failing
// MIG query degrades the GPU: if MIG mode is unknown or its instances
// cannot be listed, publishing the GPU as usable would be a guess either way.
func (r *gpuReader) mig() {
	pt, err := r.migMode()
	if errors.Is(err, errNoMIG) {
		return
	}
	if err != nil {
		r.degrade(err)
		return
	}
	r.g.Partitioning = pt
	profiles, err := r.migProfiles(pt)
	if err != nil {
		if pt.Enabled {
			r.degrade(err)
			return
		}
		// With MIG off the table only matters for a later mode change.
		r.b.logger.Info("MIG profile table unavailable", "uuid", r.g.UUID, "err", err)
	}
	if !pt.Enabled {
		return
	}
	parts, err := r.migInstances(profiles)
	if err != nil {
		r.degrade(err)
	}
	r.g.Partitions = parts
}

// nothingToPublish says why a GPU read whole yields no device: MIG mode
// is on, so the whole GPU cannot run work, and NVML lists no GPU instance
// profile (every profile answers NOT_SUPPORTED), so no partition can exist
// or be placed. "" where the GPU publishes something.
func nothingToPublish(g *inventory.GPU) string {
	pt := g.Partitioning
	if pt == nil || !pt.Enabled || len(pt.Profiles) > 0 || len(g.Partitions) > 0 || g.Health.Lost {
		return ""
	}
	return "MIG mode is on and NVML reports no GPU instance profile: neither the whole GPU nor a partition can be published"
}

// migMode reads the GPU's current MIG mode into a Partitioning without
// profiles; errNoMIG where the GPU has no MIG. A pending mode (set, waiting
// for a reset) is not the mode: only the current one decides what exists.
func (r *gpuReader) migMode() (*inventory.Partitioning, error) {
	cur, _, ret := r.h.GetMigMode()
	err := check("nvmlDeviceGetMigMode", ret)
	if notSupported(err) {
		return nil, fmt.Errorf("%w: %w", errNoMIG, err)
	}
	if err != nil {
		return nil, err
	}
	return &inventory.Partitioning{
		Kind:                 inventory.PartitionMIG,
		Enabled:              cur == nvml.DEVICE_MIG_ENABLE,
		ModeChangeNeedsReset: modeChangeNeedsReset(r.g.Architecture),
	}, nil
}

// modeChangeNeedsReset is the MIG user guide's rule ("Enable MIG Mode"):
// A100/A30 (Ampere) need a GPU reset to change mode; "starting with the
// Hopper generation ... no longer requires a GPU reset". An unknown
// architecture gets the stricter rule.
func modeChangeNeedsReset(architecture string) bool {
	return architecture == "ampere" || architecture == ""
}

// migProfiles reads every GI profile the GPU supports and its possible
// placements into pt, and returns the raw rows for instance lookup.
func (r *gpuReader) migProfiles(pt *inventory.Partitioning) ([]giProfile, error) {
	if r.g.MemoryBytes <= 0 {
		return nil, fmt.Errorf("MIG profiles: GPU memory unknown, cannot name profiles")
	}
	var rows []giProfile
	for id := 0; id < nvml.GPU_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := r.h.GetGpuInstanceProfileInfo(id)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // this profile does not exist on this GPU
		}
		if err := check(fmt.Sprintf("nvmlDeviceGetGpuInstanceProfileInfo(%d)", id), ret); err != nil {
			return nil, fmt.Errorf("MIG profiles: %w", err)
		}
		name := migProfileName(int(info.Id), info.SliceCount, info.MemorySizeMB, uint64(r.g.MemoryBytes))
		places, ret := r.h.GetGpuInstancePossiblePlacements(&info)
		if err := check("nvmlDeviceGetGpuInstancePossiblePlacements("+name+")", ret); err != nil {
			return nil, fmt.Errorf("MIG profiles: %w", err)
		}
		p := inventory.PartitionProfile{
			Name:          name,
			MemoryBytes:   int64(info.MemorySizeMB) * mib,
			ComputeUnits:  int64(info.MultiprocessorCount),
			ComputeSlices: int(info.SliceCount),
			Engines:       giEngines(info),
		}
		for _, pl := range places {
			p.Placements = append(p.Placements, inventory.Placement{Start: int(pl.Start), Size: int(pl.Size)})
			p.MemorySlices = max(p.MemorySlices, int(pl.Size))
			// The GPU's slice counts are the largest extents in its table.
			pt.MemorySlices = max(pt.MemorySlices, int(pl.Start+pl.Size))
		}
		p.MaxInstances = maxInstances(info.InstanceCount, len(places))
		pt.ComputeSlices = max(pt.ComputeSlices, int(info.SliceCount))
		pt.Profiles = append(pt.Profiles, p)
		rows = append(rows, giProfile{info: info, name: name})
	}
	// Smallest first, as the simulated backend lists them.
	sort.SliceStable(pt.Profiles, func(a, b int) bool {
		pa, pb := pt.Profiles[a], pt.Profiles[b]
		if pa.MemoryBytes != pb.MemoryBytes {
			return pa.MemoryBytes < pb.MemoryBytes
		}
		if pa.ComputeSlices != pb.ComputeSlices {
			return pa.ComputeSlices < pb.ComputeSlices
		}
		return pa.Name < pb.Name
	})
	return rows, nil
}

// maxInstances is a profile's instance cap where its placements alone do
// not impose it: NVML's instanceCount is the most instances of the profile
// an empty GPU takes, so a count below the number of placements is a limit
// of its own (a 1g.10gb+me takes the GPU's one OFA: 7 placements, 1
// instance). 0 means the placements are the limit.
func maxInstances(instanceCount uint32, placements int) int {
	if instanceCount == 0 || int(instanceCount) >= placements {
		return 0
	}
	return int(instanceCount)
}

func giEngines(info nvml.GpuInstanceProfileInfo) map[string]int64 {
	return map[string]int64{
		"copyEngines":  int64(info.CopyEngineCount),
		"decoders":     int64(info.DecoderCount),
		"encoders":     int64(info.EncoderCount),
		"jpegDecoders": int64(info.JpegCount),
		"ofa":          int64(info.OfaCount),
	}
}

// migInstances lists the existing GI/CI pairs and matches each to its MIG
// device for the UUID. A CI without a MIG device cannot be handed to a
// container, so it is left out and reported; the rest are kept.
func (r *gpuReader) migInstances(profiles []giProfile) ([]inventory.Partition, error) {
	devices, err := r.migDevices()
	if err != nil {
		return nil, err
	}
	var parts []inventory.Partition
	var missing []string
	err = r.eachGPUInstance(profiles, func(prof giProfile, gi nvml.GpuInstance) error {
		giInfo, ret := gi.GetInfo()
		if err := check("nvmlGpuInstanceGetInfo", ret); err != nil {
			return fmt.Errorf("MIG instances (%s): %w", prof.name, err)
		}
		cis, err := computeInstances(gi)
		if err != nil {
			return fmt.Errorf("MIG instances (%s, GI %d): %w", prof.name, giInfo.Id, err)
		}
		for _, ci := range cis {
			key := [2]int{int(giInfo.Id), int(ci.info.Id)}
			dev, ok := devices[key]
			if !ok {
				missing = append(missing, fmt.Sprintf("GI %d CI %d", key[0], key[1]))
				continue
			}
			parts = append(parts, migPartition(prof, giInfo, ci, dev))
		}
		return nil
	})
	// NVML returns instances in no documented order; publish by slot.
	sort.Slice(parts, func(a, b int) bool {
		if parts[a].Placement.Start != parts[b].Placement.Start {
			return parts[a].Placement.Start < parts[b].Placement.Start
		}
		return parts[a].ComputeInstanceID < parts[b].ComputeInstanceID
	})
	if len(missing) > 0 {
		err = errors.Join(err, fmt.Errorf("MIG instances without a MIG device handle: %v", missing))
	}
	return parts, err
}

// eachGPUInstance calls fn for every GPU instance of the GPU, profile row
// by row (NVML lists GIs only per profile). A GI fn fails on is reported
// after the rest are walked: Discover keeps the partitions it could read,
// and a stray sweep still destroys the GIs it can. A row that cannot be
// listed ends the walk: that failure is the GPU's, not one GI's, and
// repeating it per row would only bury the cause.
func (r *gpuReader) eachGPUInstance(rows []giProfile, fn func(giProfile, nvml.GpuInstance) error) error {
	var errs []error
	for _, prof := range rows {
		gis, ret := r.h.GetGpuInstances(&prof.info)
		if err := check("nvmlDeviceGetGpuInstances("+prof.name+")", ret); err != nil {
			return errors.Join(append(errs, fmt.Errorf("MIG instances: %w", err))...)
		}
		for _, gi := range gis {
			if err := fn(prof, gi); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// migPartition is one compute instance as a partition: profile and
// placement from its GI, ids from GI and CI, and size and engines from the
// MIG device where it reports them, else from the profile rows. Discover
// and CreatePartition both fill partitions here, so a carved partition is
// returned exactly as the next Discover publishes it.
func migPartition(prof giProfile, gi nvml.GpuInstanceInfo, ci ciEntry, dev migDevice) inventory.Partition {
	p := inventory.Partition{
		Kind:              inventory.PartitionMIG,
		Profile:           migDeviceProfileName(prof.name, prof.info.SliceCount, ci.profile.SliceCount),
		Placement:         inventory.Placement{Start: int(gi.Placement.Start), Size: int(gi.Placement.Size)},
		UUID:              dev.uuid,
		GPUInstanceID:     int(gi.Id),
		ComputeInstanceID: int(ci.info.Id),
		MemoryBytes:       int64(prof.info.MemorySizeMB) * mib,
		ComputeUnits:      int64(ci.profile.MultiprocessorCount),
		Engines:           giEngines(prof.info),
	}
	if a := dev.attrs; a != nil {
		// What the MIG device itself reports wins over the profile row.
		p.MemoryBytes = int64(a.MemorySizeMB) * mib
		p.ComputeUnits = int64(a.MultiprocessorCount)
		p.Engines = map[string]int64{
			"copyEngines":  int64(a.SharedCopyEngineCount),
			"decoders":     int64(a.SharedDecoderCount),
			"encoders":     int64(a.SharedEncoderCount),
			"jpegDecoders": int64(a.SharedJpegCount),
			"ofa":          int64(a.SharedOfaCount),
		}
	}
	return p
}

type ciEntry struct {
	info    nvml.ComputeInstanceInfo
	profile nvml.ComputeInstanceProfileInfo
}

func computeInstances(gi nvml.GpuInstance) ([]ciEntry, error) {
	var out []ciEntry
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		prof, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if err := check(fmt.Sprintf("nvmlGpuInstanceGetComputeInstanceProfileInfo(%d)", id), ret); err != nil {
			return nil, err
		}
		cis, ret := gi.GetComputeInstances(&prof)
		if err := check("nvmlGpuInstanceGetComputeInstances", ret); err != nil {
			return nil, err
		}
		for _, ci := range cis {
			info, ret := ci.GetInfo()
			if err := check("nvmlComputeInstanceGetInfo", ret); err != nil {
				return nil, err
			}
			out = append(out, ciEntry{info: info, profile: prof})
		}
	}
	return out, nil
}

type migDevice struct {
	uuid  string
	attrs *nvml.DeviceAttributes // nil where NVML would not say
}

// migDevices maps (GI id, CI id) to the MIG device handles of the GPU.
func (r *gpuReader) migDevices() (map[[2]int]migDevice, error) {
	out := map[[2]int]migDevice{}
	err := eachMIGDevice(r.h, func(i int, d nvml.Device) error {
		gi, ret1 := d.GetGpuInstanceId()
		ci, ret2 := d.GetComputeInstanceId()
		uuid, ret3 := d.GetUUID()
		for _, e := range []error{check("nvmlDeviceGetGpuInstanceId", ret1), check("nvmlDeviceGetComputeInstanceId", ret2), check("nvmlDeviceGetUUID(MIG)", ret3)} {
			if e != nil {
				return fmt.Errorf("MIG device %d: %w", i, e)
			}
		}
		md := migDevice{uuid: uuid}
		if a, ret := d.GetAttributes(); ret == nvml.SUCCESS {
			md.attrs = &a
		}
		out[[2]int{gi, ci}] = md
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachMIGDevice calls fn with the index and handle of every MIG device of
// h, stopping at the first error. Indices without a device (NOT_FOUND,
// INVALID_ARGUMENT) are gaps, not errors.
func eachMIGDevice(h nvml.Device, fn func(int, nvml.Device) error) error {
	n, ret := h.GetMaxMigDeviceCount()
	if err := check("nvmlDeviceGetMaxMigDeviceCount", ret); err != nil {
		return fmt.Errorf("MIG devices: %w", err)
	}
	for i := 0; i < n; i++ {
		d, ret := h.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if err := check(fmt.Sprintf("nvmlDeviceGetMigDeviceHandleByIndex(%d)", i), ret); err != nil {
			return fmt.Errorf("MIG devices: %w", err)
		}
		if err := fn(i, d); err != nil {
			return err
		}
	}
	return nil
}
