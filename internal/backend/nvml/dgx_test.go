//go:build cgo && linux

package nvml

import (
	"context"
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// nvmlProfileIDs are NVML's GI profile ids of the H100's profiles.
var nvmlProfileIDs = map[string]uint32{
	"1g.10gb": nvml.GPU_INSTANCE_PROFILE_1_SLICE, "1g.10gb+me": nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1,
	"1g.20gb": nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, "2g.20gb": nvml.GPU_INSTANCE_PROFILE_2_SLICE,
	"3g.40gb": nvml.GPU_INSTANCE_PROFILE_3_SLICE, "4g.40gb": nvml.GPU_INSTANCE_PROFILE_4_SLICE,
	"7g.80gb": nvml.GPU_INSTANCE_PROFILE_7_SLICE,
}

// dgxH100 is the sim's dgx-h100 machine as go-nvml's dgxh100 mock, made to
// report what that machine's NVML reports. The mock's defaults differ from
// a real DGX H100 in ways that are mock simplifications, not NVML
// behaviour, so they are set from the sim catalogue's cited captures:
//   - bus IDs, PCIe roots and bridges, NUMA nodes: [SMI]/[TOPO]/[NCCLLOG] (mock: 0000:0N:00.0)
//   - driver 580.65.06 (mock: 550.54.15)
//   - FB total 81559 MiB [SMI] (mock: 81920, an even 80 GiB)
//   - GI profile rows from nvidia-smi mig -lgip/-lgipp [LGIP]/[LGIPP]
//     (mock: 7g.80gb with 112 SMs and placement size 7, 1g.20gb size 1);
//     instance counts, which the catalogue has only as maxInstances, are
//     the mock's (the same as -lgip's "Instances" totals); the full-size CI
//     of each GI has the GI's SMs, so MIG devices report the rows' values
//   - UUIDs: the sim's, so fabricIsland (a hash of member UUIDs) can be
//     compared too; with the mock's random UUIDs only the island id differs.
//   - NVLink: 18 NVLink 4.0 links per GPU to 4 NVSwitch chips [H100DS]/[DGXUG].
func dgxH100(t *testing.T, m *sim.Machine) (*server.Server, string) {
	t.Helper()
	var slots []gpuSlot
	for _, g := range m.Node.GPUs {
		// The catalogue's bridges, none where it knows none ([NCCLLOG]).
		slots = append(slots, gpuSlot{bdf: g.PCIBusID, root: g.PCIeRoot, numa: g.NUMANode, bridges: append([]string{}, g.PCIeBridges...)})
	}
	s, root := newMachine(t, gpus.Multiple(8, gpus.H100_SXM5_80GB), slots)
	table := map[int]nvml.GpuInstanceProfileInfo{}
	places := map[int][]nvml.GpuInstancePlacement{}
	cis := map[int]map[int]nvml.ComputeInstanceProfileInfo{}
	for _, p := range m.Node.GPUs[0].Partitioning.Profiles {
		id, ok := nvmlProfileIDs[p.Name]
		if !ok {
			t.Fatalf("no NVML profile id for %s", p.Name)
		}
		table[int(id)] = nvml.GpuInstanceProfileInfo{
			Id: id, SliceCount: uint32(p.ComputeSlices), MultiprocessorCount: uint32(p.ComputeUnits),
			CopyEngineCount: uint32(p.Engines["copyEngines"]), DecoderCount: uint32(p.Engines["decoders"]),
			EncoderCount: uint32(p.Engines["encoders"]), JpegCount: uint32(p.Engines["jpegDecoders"]),
			OfaCount: uint32(p.Engines["ofa"]), MemorySizeMB: uint64(p.MemoryBytes >> 20),
			InstanceCount: gpus.H100_SXM5_80GB.MIGProfiles.GpuInstanceProfiles[int(id)].InstanceCount,
		}
		for _, pl := range p.Placements {
			places[int(id)] = append(places[int(id)], nvml.GpuInstancePlacement{Start: uint32(pl.Start), Size: uint32(pl.Size)})
		}
		full := fullComputeInstanceProfile[uint32(p.ComputeSlices)]
		cis[int(id)] = map[int]nvml.ComputeInstanceProfileInfo{full: {
			Id: uint32(full), SliceCount: uint32(p.ComputeSlices), InstanceCount: 1, MultiprocessorCount: uint32(p.ComputeUnits),
		}}
	}
	migProfiles := gpus.MIGProfileConfig{GpuInstanceProfiles: table, ComputeInstanceProfiles: cis, GpuInstancePlacements: places}
	for i, dev := range s.Devices {
		d := dev.(*server.Device)
		d.UUID = m.Node.GPUs[i].UUID
		// The mock reads profile rows, placements and CI profiles from here.
		d.Config.MIGProfiles = migProfiles
		d.MemoryInfo.Total = uint64(m.Node.GPUs[i].MemoryBytes)
	}
	nvswitchFabric(s, 18, uint32(nvml.NVLINK_VERSION_4_0))
	return s, root
}

func TestDGXH100MatchesSim(t *testing.T) {
	m, err := sim.Profile("dgx-h100", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	s, root := dgxH100(t, m)
	b := newBackend(t, s, root)
	got, err := b.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := &m.Node
	if len(got.GPUs) != len(want.GPUs) {
		t.Fatalf("%d GPUs, want %d", len(got.GPUs), len(want.GPUs))
	}

	// Inventory: every whole-GPU value, the MIG table and health agree.
	// Exception: whole-GPU engine counts. NVML has no whole-GPU engine
	// query (nvmlDeviceGetAttributes is for MIG handles), so the nvml
	// backend leaves them out; the sim publishes the datasheet's.
	for i := range want.GPUs {
		w, g := want.GPUs[i], got.GPUs[i]
		if g.Engines != nil {
			t.Errorf("GPU %d: engines %v, want none (NVML does not report them)", i, g.Engines)
		}
		w.Engines = nil
		if !reflect.DeepEqual(g, w) {
			t.Errorf("GPU %d:\n got %+v\nwant %+v", i, g, w)
			if !reflect.DeepEqual(g.Partitioning, w.Partitioning) {
				t.Errorf("partitioning:\n got %+v\nwant %+v", *g.Partitioning, *w.Partitioning)
			}
		}
	}
	gf, err := fabric.Compute(got)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := fabric.Compute(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gf, wf) {
		t.Errorf("topology:\n got %+v\nwant %+v", gf, wf)
	}

	// Published slices: same devices, order, attributes; capacities apart
	// from the sim's whole-GPU engine counts.
	gr, err := publish.Build("node-1", got, publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	wr, err := publish.Build("node-1", want, publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gr.Order, wr.Order) {
		t.Fatalf("order %v, want %v", gr.Order, wr.Order)
	}
	gd, wd := devices(gr), devices(wr)
	for _, name := range wr.Order {
		g, w := gd[name], wd[name]
		if !reflect.DeepEqual(g.Attributes, w.Attributes) {
			t.Errorf("%s attributes:\n got %v\nwant %v", name, g.Attributes, w.Attributes)
		}
		for _, engine := range []resourceapi.QualifiedName{"decoders", "encoders", "jpegDecoders", "ofa"} {
			delete(w.Capacity, engine)
		}
		if !reflect.DeepEqual(g.Capacity, w.Capacity) {
			t.Errorf("%s capacity:\n got %v\nwant %v", name, g.Capacity, w.Capacity)
		}
	}
	if a := gd["gpu-0"].Attributes; *a["fabric"].StringValue != "nvswitch" || *a["fabricBandwidthGBps"].IntValue != 450 {
		t.Errorf("gpu-0 fabric %s %d GB/s, want nvswitch 450", *a["fabric"].StringValue, *a["fabricBandwidthGBps"].IntValue)
	}
}

// With the mock's own random UUIDs the only attributes that differ are the
// identifiers: uuid and fabricIsland (derived from the UUIDs).
func TestDGXH100OnlyIdentifiersDependOnUUIDs(t *testing.T) {
	m, err := sim.Profile("dgx-h100", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	s, root := dgxH100(t, m)
	for _, dev := range s.Devices {
		dev.(*server.Device).UUID = "GPU-00000000-0000-0000-0000-0000000000" + dev.(*server.Device).PciBusID[5:7]
	}
	got, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gr, err := publish.Build("node-1", got, publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	wr, err := publish.Build("node-1", &m.Node, publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	gd, wd := devices(gr), devices(wr)
	for _, name := range wr.Order {
		for attr, w := range wd[name].Attributes {
			g, ok := gd[name].Attributes[attr]
			same := ok && reflect.DeepEqual(g, w)
			if identifier := attr == "uuid" || attr == "fabricIsland"; same == identifier {
				t.Errorf("%s %s: got %v want %v (identifier %v)", name, attr, g, w, identifier)
			}
		}
	}
}

func devices(r *publish.Result) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, p := range r.Resources.Pools {
		for _, s := range p.Slices {
			for _, d := range s.Devices {
				out[d.Name] = d
			}
		}
	}
	return out
}

// The mock's own H100 profile rows get nvidia-smi's names.
func TestMockH100ProfileNames(t *testing.T) {
	slots := []gpuSlot{{bdf: "0000:18:00.0", root: "pci0000:15", numa: 0}}
	s, root := newMachine(t, []gpus.Config{gpus.H100_SXM5_80GB}, slots)
	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range n.GPUs[0].Partitioning.Profiles {
		names = append(names, p.Name)
	}
	want := []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("profiles %v, want %v", names, want)
	}
	if pt := n.GPUs[0].Partitioning; pt.ModeChangeNeedsReset || pt.Enabled || pt.ComputeSlices != 7 {
		t.Errorf("partitioning %+v: want Hopper (no reset), disabled, 7 compute slices", pt)
	}
}
