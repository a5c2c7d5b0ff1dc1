//go:build cgo && linux

package nvml

import (
	"context"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/tessera-gpu/tessera/internal/telemetry"
)

// gpuReadings is what one mock GPU answers to the telemetry calls, and
// counts them.
type gpuReadings struct {
	mem                       nvml.Memory
	util                      uint32
	temp, power, limit, clock uint32
	// ret per call name (SUCCESS when absent)
	ret   map[string]nvml.Return
	calls map[string]int
	// all counts every NVML call of the GPU and its MIG devices that a
	// poll makes, the lookups (UUIDs, MIG mode and handles) too.
	all int
}

const (
	tcMemory = "memory"
	tcUtil   = "utilization"
	tcTemp   = "temperature"
	tcPower  = "power"
	tcLimit  = "limit"
	tcClock  = "clock"
	tcMIGMem = "mig-memory"
)

func (r *gpuReadings) answer(call string) nvml.Return {
	r.calls[call]++
	r.all++
	if ret, ok := r.ret[call]; ok {
		return ret
	}
	return nvml.SUCCESS
}

// install puts r behind d's telemetry calls; MIG devices of d answer
// their memory as a quarter used of their profile's, counted in r too.
func (r *gpuReadings) install(t *testing.T, d *server.Device) {
	r.calls = map[string]int{}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return r.mem, r.answer(tcMemory) }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: r.util, Memory: 99}, r.answer(tcUtil)
	}
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			t.Errorf("temperature sensor %d read; want the GPU's", s)
		}
		return r.temp, r.answer(tcTemp)
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return r.power, r.answer(tcPower) }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return r.limit, r.answer(tcLimit) }
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c != nvml.CLOCK_SM {
			t.Errorf("clock %d read; want SM", c)
		}
		return r.clock, r.answer(tcClock)
	}
	uuid, migMode, maxMIG := d.GetUUIDFunc, d.GetMigModeFunc, d.GetMaxMigDeviceCountFunc
	d.GetUUIDFunc = func() (string, nvml.Return) { r.all++; return uuid() }
	d.GetMigModeFunc = func() (int, int, nvml.Return) { r.all++; return migMode() }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { r.all++; return maxMIG() }
	handle := d.GetMigDeviceHandleByIndexFunc
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		r.all++
		dev, ret := handle(i)
		if ret != nvml.SUCCESS {
			return dev, ret
		}
		md := dev.(*mock.Device)
		a, _ := md.GetAttributes()
		migUUID := md.GetUUIDFunc
		md.GetUUIDFunc = func() (string, nvml.Return) { r.all++; return migUUID() }
		md.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			total := a.MemorySizeMB * mib
			return nvml.Memory{Total: total, Used: total / 4, Free: total - total/4}, r.answer(tcMIGMem)
		}
		return md, nvml.SUCCESS
	}
}

// telemetryMachine: two A100s, GPU 0 whole and answering everything, GPU 1
// in MIG mode with two instances, answering as MIG mode does (no
// utilization, no whole-GPU memory for an unprivileged caller) and with a
// temperature sensor that fails.
func telemetryMachine(t *testing.T) (*Backend, []*gpuReadings, []string) {
	t.Helper()
	s, root := newMachine(t, gpus.Multiple(2, gpus.A100_SXM4_40GB), dgxA100Slots()[:2])
	d1 := s.Devices[1].(*server.Device)
	if _, ret := d1.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	carve(t, d1, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	carve(t, d1, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	r := []*gpuReadings{
		{mem: nvml.Memory{Total: 40 << 30, Used: 30 << 30}, util: 70, temp: 55, power: 350500, limit: 400000, clock: 1410},
		{mem: nvml.Memory{Total: 40 << 30}, temp: 40, power: 90000, limit: 400000, clock: 210},
	}
	for i, dev := range s.Devices {
		r[i].install(t, dev.(*server.Device))
	}
	b := newBackend(t, s, root)
	n, err := b.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, g := range n.GPUs {
		uuids = append(uuids, g.UUID)
	}
	for _, p := range n.GPUs[1].Partitions {
		uuids = append(uuids, p.UUID)
	}
	if len(uuids) != 4 {
		t.Fatalf("discovered %v; want two GPUs and two MIG devices", uuids)
	}
	for _, g := range r {
		clear(g.calls) // what Discover asked
		g.all = 0
	}
	// After Discover, which needs the GPU's memory to name its profiles.
	r[1].ret = map[string]nvml.Return{tcUtil: nvml.ERROR_NOT_SUPPORTED, tcMemory: nvml.ERROR_NO_PERMISSION, tcTemp: nvml.ERROR_UNKNOWN}
	return b, r, uuids
}

func TestReadTelemetry(t *testing.T) {
	b, r, uuid := telemetryMachine(t)
	const polls = 2
	var samples []telemetry.Sample
	for range polls {
		var err error
		if samples, err = b.ReadTelemetry(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]telemetry.Sample{}
	for _, s := range samples {
		got[s.UUID] = s
	}
	// Each device's known fields, exactly.
	want := map[string]map[telemetry.Field]float64{
		uuid[0]: {telemetry.MemoryUsedBytes: 30 << 30, telemetry.MemoryTotalBytes: 40 << 30, telemetry.UtilizationPercent: 70,
			telemetry.TemperatureCelsius: 55, telemetry.PowerWatts: 350.5, telemetry.PowerLimitWatts: 400, telemetry.SMClockMHz: 1410},
		uuid[1]: {telemetry.PowerWatts: 90, telemetry.PowerLimitWatts: 400, telemetry.SMClockMHz: 210},
	}
	for _, u := range uuid[2:] {
		s := got[u]
		total, ok := s.Get(telemetry.MemoryTotalBytes)
		if !ok || total == 0 {
			t.Errorf("MIG device %s: total memory (%v, %v)", u, total, ok)
			continue
		}
		want[u] = map[telemetry.Field]float64{telemetry.MemoryTotalBytes: total, telemetry.MemoryUsedBytes: total / 4}
	}
	if len(got) != len(want) {
		t.Errorf("samples of %d devices, want %d", len(got), len(want))
	}
	for u, fields := range want {
		s, ok := got[u]
		if !ok {
			t.Errorf("no sample of %s", u)
			continue
		}
		for _, f := range telemetry.Fields {
			v, known := s.Get(f)
			w, wantKnown := fields[f]
			if known != wantKnown || v != w {
				t.Errorf("%s %s: (%v, %v), want (%v, %v)", u, f, v, known, w, wantKnown)
			}
		}
	}
	// One call per GPU and reading per poll, unsupported ones too; one
	// memory call per MIG device.
	for i, g := range r {
		for _, c := range []string{tcMemory, tcUtil, tcTemp, tcPower, tcLimit, tcClock} {
			if g.calls[c] != polls {
				t.Errorf("GPU %d: %d %s calls in %d polls", i, g.calls[c], c, polls)
			}
		}
	}
	// Every call a poll makes: a whole GPU its UUID, six readings and its
	// MIG mode (8); a MIG GPU those, the MIG device count, seven handle
	// lookups and each MIG device's UUID and memory (8+1+7+2*2 = 20).
	for i, want := range []int{8, 20} {
		if got := r[i].all; got != want*polls {
			t.Errorf("GPU %d: %d NVML calls in %d polls, want %d per poll", i, got, polls, want)
		}
	}
	t.Logf("NVML calls per poll: whole GPU %d, MIG GPU with 2 instances %d", r[0].all/polls, r[1].all/polls)
	if r[0].calls[tcMIGMem] != 0 || r[1].calls[tcMIGMem] != 2*polls {
		t.Errorf("MIG memory calls: %d on the whole GPU, %d on the MIG GPU; want 0 and %d", r[0].calls[tcMIGMem], r[1].calls[tcMIGMem], 2*polls)
	}
}

// A closed backend, or GPUs none of which can be named, fail the read;
// one GPU among readable ones does not.
func TestReadTelemetryFails(t *testing.T) {
	s, root := newMachine(t, gpus.Multiple(2, gpus.A100_SXM4_40GB), dgxA100Slots()[:2])
	for _, dev := range s.Devices {
		(&gpuReadings{}).install(t, dev.(*server.Device))
	}
	b := newBackend(t, s, root)
	d0 := s.Devices[0].(*server.Device)
	uuid0 := d0.GetUUIDFunc
	d0.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	samples, err := b.ReadTelemetry(context.Background())
	if err != nil || len(samples) != 1 {
		t.Errorf("one GPU lost: %d samples, %v; want the other's", len(samples), err)
	}
	s.Devices[1].(*server.Device).GetUUIDFunc = d0.GetUUIDFunc
	if _, err := b.ReadTelemetry(context.Background()); err == nil || !strings.Contains(err.Error(), "read telemetry of GPU 0") || !strings.Contains(err.Error(), "ERROR_GPU_IS_LOST") {
		t.Errorf("every GPU lost: %v", err)
	}
	d0.GetUUIDFunc = uuid0
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadTelemetry(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("closed backend: %v", err)
	}
}
