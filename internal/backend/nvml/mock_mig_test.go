//go:build cgo && linux

package nvml

import (
	"sort"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// go-nvml's mock server creates GPU and compute instances wherever asked
// and never refuses. migHW adds the hardware's rules to one mock GPU, as
// the NVML API reference and the MIG user guide state them:
//
//   - a GI is created only with MIG mode on (NOT_SUPPORTED otherwise), at
//     one of its profile's placements (INVALID_ARGUMENT otherwise), on
//     memory slices no other GI holds, within the GPU's compute slices and
//     the profile's instanceCount (INSUFFICIENT_RESOURCES otherwise);
//   - a CI takes compute slices of its GI, within the GI's slices and the CI
//     profile's instanceCount (INSUFFICIENT_RESOURCES otherwise);
//   - a GI with a CI cannot be destroyed (IN_USE); destroying twice is
//     INVALID_ARGUMENT; GI and CI ids are the lowest free ones;
//   - nvmlDeviceSetMigMode applies at once on Hopper; where a mode change
//     needs a reset (Ampere) it only sets the pending mode and returns
//     activation status RESET_REQUIRED; setting the current mode cancels a
//     pending change.
//
// MIG device handles and their UUIDs follow the GI/CI state through the
// fixture's migDevicesOf. fail injects a return code per call name, for
// the rollback tests.
type migHW struct {
	d          *server.Device
	profiles   map[int]nvml.GpuInstanceProfileInfo
	placements map[int][]nvml.GpuInstancePlacement
	// computeSlices is the GPU's: the largest GI profile's slice count.
	computeSlices uint32

	needsReset bool // Ampere: SetMigMode leaves the mode pending
	pending    int
	// activation, when not SUCCESS, is what SetMigMode reports for a
	// change of mode, leaving it pending (a GPU in use, a VM platform).
	activation nvml.Return

	fail        map[string]nvml.Return
	calls       map[string]int
	noMIGHandle bool // MIG devices never appear (a driver that lost them)
}

// Call names for fail and calls.
const (
	callGIProfileInfo = "GetGpuInstanceProfileInfo"
	callCreateGI      = "CreateGpuInstanceWithPlacement"
	callCIProfileInfo = "GetComputeInstanceProfileInfo"
	callCreateCI      = "CreateComputeInstance"
	callGIInfo        = "GpuInstance.GetInfo"
	callCIInfo        = "ComputeInstance.GetInfo"
	callMIGHandle     = "GetMigDeviceHandleByIndex"
	callMIGUUID       = "MigDevice.GetUUID"
	callDestroyGI     = "GpuInstance.Destroy"
	callDestroyCI     = "ComputeInstance.Destroy"
	callSetMigMode    = "SetMigMode"
)

// newMIGHW installs the rules on d, taking d's profile table and placements
// as they are now (set them up first) as the hardware's.
func newMIGHW(t *testing.T, d *server.Device) *migHW {
	t.Helper()
	hw := &migHW{
		d:          d,
		profiles:   map[int]nvml.GpuInstanceProfileInfo{},
		placements: map[int][]nvml.GpuInstancePlacement{},
		needsReset: d.Config.Architecture == nvml.DEVICE_ARCH_AMPERE,
		pending:    d.MigMode,
		activation: nvml.SUCCESS,
		fail:       map[string]nvml.Return{},
		calls:      map[string]int{},
	}
	for id := 0; id < nvml.GPU_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := d.GetGpuInstanceProfileInfoFunc(id)
		if ret != nvml.SUCCESS {
			continue
		}
		places, _ := d.GetGpuInstancePossiblePlacementsFunc(&info)
		hw.profiles[id] = info
		hw.placements[id] = places
		hw.computeSlices = max(hw.computeSlices, info.SliceCount)
	}
	hw.install()
	return hw
}

// boot sets the MIG mode as if the GPU came up in it.
func (hw *migHW) boot(enabled bool) {
	hw.d.Lock()
	defer hw.d.Unlock()
	hw.d.MigMode = migModeValue(enabled)
	hw.pending = hw.d.MigMode
}

// enter counts a call and returns its injected failure (SUCCESS if none).
func (hw *migHW) enter(call string) nvml.Return {
	hw.calls[call]++
	if r, ok := hw.fail[call]; ok {
		return r
	}
	return nvml.SUCCESS
}

func (hw *migHW) install() {
	d := hw.d
	profileInfo := d.GetGpuInstanceProfileInfoFunc
	d.GetGpuInstanceProfileInfoFunc = func(id int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		if r := hw.enter(callGIProfileInfo); r != nvml.SUCCESS {
			return nvml.GpuInstanceProfileInfo{}, r
		}
		return profileInfo(id)
	}
	d.GetMigModeFunc = func() (int, int, nvml.Return) {
		d.RLock()
		defer d.RUnlock()
		return d.MigMode, hw.pending, nvml.SUCCESS
	}
	d.SetMigModeFunc = hw.setMigMode
	d.CreateGpuInstanceFunc = func(*nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
		// Tessera always places; a placement-less create is not modelled.
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	d.CreateGpuInstanceWithPlacementFunc = hw.createGI
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		d.RLock()
		defer d.RUnlock()
		for gi := range d.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	handle := d.GetMigDeviceHandleByIndexFunc
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if r := hw.enter(callMIGHandle); r != nvml.SUCCESS {
			return nil, r
		}
		if hw.noMIGHandle {
			return nil, nvml.ERROR_NOT_FOUND
		}
		dev, ret := handle(i)
		if ret != nvml.SUCCESS {
			return dev, ret
		}
		md := dev.(*mock.Device)
		uuid := md.GetUUIDFunc
		md.GetUUIDFunc = func() (string, nvml.Return) {
			if r := hw.enter(callMIGUUID); r != nvml.SUCCESS {
				return "", r
			}
			return uuid()
		}
		return md, nvml.SUCCESS
	}
}

func (hw *migHW) setMigMode(mode int) (nvml.Return, nvml.Return) {
	if r := hw.enter(callSetMigMode); r != nvml.SUCCESS {
		return nvml.SUCCESS, r
	}
	d := hw.d
	d.Lock()
	defer d.Unlock()
	switch {
	case mode == d.MigMode:
		hw.pending = mode // nothing to activate; a pending change is cancelled
		return nvml.SUCCESS, nvml.SUCCESS
	case hw.needsReset:
		hw.pending = mode
		return nvml.ERROR_RESET_REQUIRED, nvml.SUCCESS
	case hw.activation != nvml.SUCCESS:
		hw.pending = mode
		return hw.activation, nvml.SUCCESS
	case mode == nvml.DEVICE_MIG_DISABLE && len(d.GpuInstances) > 0:
		// Turning MIG off would destroy the GIs; the driver will not.
		return nvml.ERROR_IN_USE, nvml.SUCCESS
	}
	d.MigMode, hw.pending = mode, mode
	return nvml.SUCCESS, nvml.SUCCESS
}

func (hw *migHW) createGI(info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	if r := hw.enter(callCreateGI); r != nvml.SUCCESS {
		return nil, r
	}
	d := hw.d
	d.Lock()
	defer d.Unlock()
	if d.MigMode != nvml.DEVICE_MIG_ENABLE {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	prof, ok := hw.profiles[int(info.Id)]
	if !ok || placement == nil || !containsPlacement(hw.placements[int(info.Id)], *placement) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	usedCompute, same := prof.SliceCount, uint32(0)
	var ids []int
	for gi := range d.GpuInstances {
		p := gi.Info.Placement
		if placement.Start < p.Start+p.Size && p.Start < placement.Start+placement.Size {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		usedCompute += hw.profiles[int(gi.Info.ProfileId)].SliceCount
		if gi.Info.ProfileId == prof.Id {
			same++
		}
		ids = append(ids, int(gi.Info.Id))
	}
	if usedCompute > hw.computeSlices || same >= prof.InstanceCount {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	gi := server.NewGpuInstanceFromInfo(nvml.GpuInstanceInfo{
		Device: d, Id: uint32(lowestFree(ids)), ProfileId: prof.Id, Placement: *placement,
	}, d.Config.MIGProfiles)
	hw.completeGI(gi)
	d.GpuInstances[gi] = struct{}{}
	return gi, nvml.SUCCESS
}

func (hw *migHW) completeGI(gi *server.GpuInstance) {
	d := hw.d
	info := gi.GetInfoFunc
	gi.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) {
		if r := hw.enter(callGIInfo); r != nvml.SUCCESS {
			return nvml.GpuInstanceInfo{}, r
		}
		return info()
	}
	ciProfileInfo := gi.GetComputeInstanceProfileInfoFunc
	gi.GetComputeInstanceProfileInfoFunc = func(id, engine int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		if r := hw.enter(callCIProfileInfo); r != nvml.SUCCESS {
			return nvml.ComputeInstanceProfileInfo{}, r
		}
		return ciProfileInfo(id, engine)
	}
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		if r := hw.enter(callCreateCI); r != nvml.SUCCESS {
			return nil, r
		}
		gi.Lock()
		defer gi.Unlock()
		prof, ok := gi.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(info.Id)]
		if !ok {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		used, same := prof.SliceCount, uint32(0)
		var ids []int
		for ci := range gi.ComputeInstances {
			p := gi.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(ci.Info.ProfileId)]
			used += p.SliceCount
			if ci.Info.ProfileId == prof.Id {
				same++
			}
			ids = append(ids, int(ci.Info.Id))
		}
		if used > hw.profiles[int(gi.Info.ProfileId)].SliceCount || same >= prof.InstanceCount {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		ci := server.NewComputeInstanceFromInfo(nvml.ComputeInstanceInfo{
			Device: d, GpuInstance: gi, Id: uint32(lowestFree(ids)), ProfileId: prof.Id,
		})
		hw.completeCI(gi, ci)
		gi.ComputeInstances[ci] = struct{}{}
		return ci, nvml.SUCCESS
	}
	gi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		gi.RLock()
		defer gi.RUnlock()
		for ci := range gi.ComputeInstances {
			if int(ci.Info.Id) == id {
				return ci, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	gi.DestroyFunc = func() nvml.Return {
		if r := hw.enter(callDestroyGI); r != nvml.SUCCESS {
			return r
		}
		d.Lock()
		defer d.Unlock()
		gi.RLock()
		defer gi.RUnlock()
		if _, ok := d.GpuInstances[gi]; !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if len(gi.ComputeInstances) > 0 {
			return nvml.ERROR_IN_USE
		}
		delete(d.GpuInstances, gi)
		return nvml.SUCCESS
	}
}

func (hw *migHW) completeCI(gi *server.GpuInstance, ci *server.ComputeInstance) {
	info := ci.GetInfoFunc
	ci.GetInfoFunc = func() (nvml.ComputeInstanceInfo, nvml.Return) {
		if r := hw.enter(callCIInfo); r != nvml.SUCCESS {
			return nvml.ComputeInstanceInfo{}, r
		}
		return info()
	}
	ci.DestroyFunc = func() nvml.Return {
		if r := hw.enter(callDestroyCI); r != nvml.SUCCESS {
			return r
		}
		gi.Lock()
		defer gi.Unlock()
		if _, ok := gi.ComputeInstances[ci]; !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		delete(gi.ComputeInstances, ci)
		return nvml.SUCCESS
	}
}

// instances is the GPU's state: placement start, GI profile id and CI count
// of each GI, in placement order.
func (hw *migHW) instances() [][3]int {
	hw.d.RLock()
	defer hw.d.RUnlock()
	var out [][3]int
	for gi := range hw.d.GpuInstances {
		gi.RLock()
		out = append(out, [3]int{int(gi.Info.Placement.Start), int(gi.Info.ProfileId), len(gi.ComputeInstances)})
		gi.RUnlock()
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

func containsPlacement(list []nvml.GpuInstancePlacement, p nvml.GpuInstancePlacement) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}

func lowestFree(ids []int) int {
	sort.Ints(ids)
	n := 0
	for _, id := range ids {
		if id == n {
			n++
		}
	}
	return n
}

// The double's rules themselves, through the NVML calls alone.
func TestMIGHWRules(t *testing.T) {
	gi := func(r *rig, profile, start, size int) (nvml.GpuInstance, nvml.Return) {
		info, ret := r.d.GetGpuInstanceProfileInfo(profile)
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		return r.d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(size)})
	}
	ci := func(g nvml.GpuInstance, profile int) (nvml.ComputeInstance, nvml.Return) {
		info, ret := g.GetComputeInstanceProfileInfo(profile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		return g.CreateComputeInstance(&info)
	}
	must := func(t *testing.T, ret nvml.Return) {
		t.Helper()
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	for _, tc := range []struct {
		name string
		rig  func(t *testing.T) *rig
		run  func(t *testing.T, r *rig) nvml.Return
		want nvml.Return
	}{
		{"GI with MIG off", h100Off, func(t *testing.T, r *rig) nvml.Return {
			_, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
			return ret
		}, nvml.ERROR_NOT_SUPPORTED},
		{"GI placement not in the list", h100On, func(t *testing.T, r *rig) nvml.Return {
			_, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 2, 4)
			return ret
		}, nvml.ERROR_INVALID_ARGUMENT},
		{"GI overlapping another", h100On, func(t *testing.T, r *rig) nvml.Return {
			_, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 2)
			must(t, ret)
			_, ret = gi(r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 3, 1)
			return ret
		}, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"GI beyond the profile's instance count", h100On, func(t *testing.T, r *rig) nvml.Return {
			_, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 0, 1)
			must(t, ret)
			_, ret = gi(r, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 5, 1)
			return ret
		}, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"GI beyond the GPU's compute slices", wideComputeRig, func(t *testing.T, r *rig) nvml.Return {
			if r.hw.computeSlices != 7 {
				t.Fatalf("GPU of %d compute slices", r.hw.computeSlices)
			}
			// Memory is free at 2, but 4+4 compute slices exceed 7.
			_, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_4_SLICE, 0, 2)
			must(t, ret)
			_, ret = gi(r, nvml.GPU_INSTANCE_PROFILE_4_SLICE, 2, 2)
			return ret
		}, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"CI beyond its GI", h100On, func(t *testing.T, r *rig) nvml.Return {
			g, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
			must(t, ret)
			_, ret = ci(g, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
			must(t, ret)
			_, ret = ci(g, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
			return ret
		}, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"GI destroy with a CI", h100On, func(t *testing.T, r *rig) nvml.Return {
			g, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
			must(t, ret)
			_, ret = ci(g, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE)
			must(t, ret)
			return g.Destroy()
		}, nvml.ERROR_IN_USE},
		{"GI destroyed twice", h100On, func(t *testing.T, r *rig) nvml.Return {
			g, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
			must(t, ret)
			must(t, g.Destroy())
			return g.Destroy()
		}, nvml.ERROR_INVALID_ARGUMENT},
		{"MIG devices follow the instances", h100On, func(t *testing.T, r *rig) nvml.Return {
			g, ret := gi(r, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 4, 2)
			must(t, ret)
			c, ret := ci(g, nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE)
			must(t, ret)
			dev, ret := r.d.GetMigDeviceHandleByIndex(0)
			must(t, ret)
			if id, _ := dev.GetGpuInstanceId(); id != 0 {
				t.Errorf("MIG device of GI %d", id)
			}
			if uuid, _ := dev.GetUUID(); !strings.HasPrefix(uuid, "MIG-") {
				t.Errorf("MIG device UUID %q", uuid)
			}
			must(t, c.Destroy())
			_, ret = r.d.GetMigDeviceHandleByIndex(0)
			return ret
		}, nvml.ERROR_NOT_FOUND},
		{"A100 mode change waits for a reset", a100Off, func(t *testing.T, r *rig) nvml.Return {
			activation, ret := r.d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
			must(t, ret)
			if cur, pending, _ := r.d.GetMigMode(); cur != nvml.DEVICE_MIG_DISABLE || pending != nvml.DEVICE_MIG_ENABLE {
				t.Errorf("mode %d pending %d, want 0 pending 1", cur, pending)
			}
			if _, ret := r.d.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.SUCCESS {
				t.Error(ret)
			}
			if cur, pending, _ := r.d.GetMigMode(); cur != pending {
				t.Errorf("setting the current mode left %d pending", pending)
			}
			return activation
		}, nvml.ERROR_RESET_REQUIRED},
		{"H100 mode change applies", h100Off, func(t *testing.T, r *rig) nvml.Return {
			activation, ret := r.d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
			must(t, ret)
			if cur, pending, _ := r.d.GetMigMode(); cur != nvml.DEVICE_MIG_ENABLE || pending != cur {
				t.Errorf("mode %d pending %d, want 1", cur, pending)
			}
			return activation
		}, nvml.SUCCESS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.run(t, tc.rig(t)); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func h100On(t *testing.T) *rig  { return h100Rig(t, true) }
func h100Off(t *testing.T) *rig { return h100Rig(t, false) }
func a100Off(t *testing.T) *rig { return a100Rig(t, false) }

// wideComputeRig is an H100 with a made-up profile, 4 of the GPU's 7
// compute slices on 2 memory slices, so compute runs out before memory.
func wideComputeRig(t *testing.T) *rig {
	t.Helper()
	s, root := newMachine(t, []gpus.Config{gpus.H100_SXM5_80GB}, dgxSlots()[:1])
	d := s.Devices[0].(*server.Device)
	d.Config.MIGProfiles = gpus.MIGProfileConfig{
		GpuInstanceProfiles: map[int]nvml.GpuInstanceProfileInfo{
			nvml.GPU_INSTANCE_PROFILE_4_SLICE: {
				Id: nvml.GPU_INSTANCE_PROFILE_4_SLICE, SliceCount: 4, InstanceCount: 4, MultiprocessorCount: 64, MemorySizeMB: 20480,
			},
			nvml.GPU_INSTANCE_PROFILE_7_SLICE: gpus.H100_SXM5_80GB.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_7_SLICE],
		},
		GpuInstancePlacements: map[int][]nvml.GpuInstancePlacement{
			nvml.GPU_INSTANCE_PROFILE_4_SLICE: {{Start: 0, Size: 2}, {Start: 2, Size: 2}, {Start: 4, Size: 2}, {Start: 6, Size: 2}},
			nvml.GPU_INSTANCE_PROFILE_7_SLICE: {{Start: 0, Size: 8}},
		},
	}
	return newRig(t, s, root, true)
}
