package isolation

import (
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/memlimit"
)

func TestAssess(t *testing.T) {
	dmem := Host{Root: "/sys/fs/cgroup", CgroupV2: true, Dmem: true, Regions: map[string]int64{
		"drm/0000:03:00.0/vram0": 1 << 30, "nvidia/0000:18:00.0/vidmem": 1 << 30}}
	plain := Host{Root: "/sys/fs/cgroup", CgroupV2: true}
	v1 := Host{Root: "/sys/fs/cgroup"}
	nv := func(driver, pci string) *inventory.GPU {
		return &inventory.GPU{Vendor: inventory.VendorNVIDIA, DriverVersion: driver, PCIBusID: pci}
	}
	amd := &inventory.GPU{Vendor: inventory.VendorAMD, PCIBusID: "0000:03:00.0"}
	mig := &inventory.Partition{Kind: inventory.PartitionMIG}
	notYet := "the agent runs without a memory limit hook (--memory-limit-hook is empty)"
	hook := memlimit.Hook{Path: "/opt/tessera/bin/tessera-cdi-hook", CgroupRoot: "/sys/fs/cgroup", StateDir: memlimit.DefaultStateDir}
	hooked := dmem
	hooked.Hook, hooked.HookInstalled = hook, true
	missing := dmem
	missing.Hook = hook
	simulated := hooked
	simulated.Hook.Simulated = true
	for _, tc := range []struct {
		name string
		gpu  *inventory.GPU
		p    *inventory.Partition
		host Host
		want Assessment
	}{
		{"NVIDIA r615 with its region", nv("615.10.0", "0000:18:00.0"), nil, dmem, Assessment{Level: Process, Blockers: []string{notYet}, MPSNamespace: true}},
		// r580 has legacy MPS only: no namespaces.
		{"NVIDIA r580", nv("580.65.6", "0000:18:00.0"), nil, dmem, Assessment{Level: Process, Blockers: []string{
			"driver 580.65.6 is older than 615.0.0, the first to enforce a cgroup's device memory limit", notYet}, MPSNamespace: false}},
		{"NVIDIA without a version", nv("", "0000:18:00.0"), nil, dmem, Assessment{Level: Process, Blockers: []string{
			"driver (unknown version) is older than 615.0.0, the first to enforce a cgroup's device memory limit", notYet}, MPSNamespace: false}},
		{"NVIDIA r615, no region for this GPU", nv("615.10.0", "0000:19:00.0"), nil, dmem, Assessment{Level: Process, Blockers: []string{
			"dmem.capacity lists no region nvidia/0000:19:00.0/vidmem for this GPU", notYet}, MPSNamespace: true}},
		{"MIG instance", nv("615.10.0", "0000:18:00.0"), mig, dmem, Assessment{Level: Process, Blockers: []string{
			"a mig partition's memory cannot be limited per cgroup", notYet}, MPSNamespace: true}},
		{"AMD with its region", amd, nil, dmem, Assessment{Level: None, Blockers: []string{notYet}, MPSNamespace: false}},
		{"AMD without dmem", amd, nil, plain, Assessment{Level: None, Blockers: []string{
			"the node's kernel offers no dmem cgroup controller (Linux 6.14+, CONFIG_CGROUP_DMEM)", notYet}, MPSNamespace: false}},
		{"NVIDIA r615, the hook installed: NVML sets it", nv("615.10.0", "0000:18:00.0"), nil, hooked, Assessment{Level: Kernel, MPSNamespace: true, Mechanism: memlimit.NVML, Region: "nvidia/0000:18:00.0/vidmem"}},
		{"AMD, the hook installed: dmem.max", amd, nil, hooked, Assessment{Level: Kernel, Mechanism: memlimit.Dmem, Region: "drm/0000:03:00.0/vram0"}},
		{"NVIDIA in the simulator: its tree plays the kernel", nv("615.10.0", "0000:18:00.0"), nil, simulated, Assessment{Level: Kernel, MPSNamespace: true, Mechanism: memlimit.Dmem, Region: "nvidia/0000:18:00.0/vidmem"}},
		{"the hook not installed", amd, nil, missing, Assessment{Level: None, Blockers: []string{"no memory limit hook is installed at /opt/tessera/bin/tessera-cdi-hook (the chart's memoryLimits.hookDir)"}}},
		{"MIG, the hook installed", nv("615.10.0", "0000:18:00.0"), mig, hooked, Assessment{Level: Process, Blockers: []string{"a mig partition's memory cannot be limited per cgroup"}, MPSNamespace: true}},
		{"cgroup v1", amd, nil, v1, Assessment{Level: None, Blockers: []string{"the node has no cgroup v2 hierarchy at /sys/fs/cgroup", notYet}, MPSNamespace: false}},
	} {
		if got := Assess(vendors.Capabilities(tc.gpu.Vendor), tc.gpu, tc.p, tc.host); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestOlderThan(t *testing.T) {
	for _, tc := range []struct {
		v, min string
		want   bool
	}{
		{"580.65.6", "615.0.0", true}, {"615.0.0", "615.0.0", false}, {"615", "615.0.0", false},
		{"620.1", "615.0.0", false}, {"", "615.0.0", true}, {"r615", "615.0.0", true}, {"1.2.3.4", "615.0.0", true},
	} {
		if got := olderThan(tc.v, tc.min); got != tc.want {
			t.Errorf("olderThan(%q, %q) = %v", tc.v, tc.min, got)
		}
	}
}

func TestLevels(t *testing.T) {
	for _, tc := range []struct {
		l, min Level
		want   bool
	}{{None, None, true}, {Process, None, true}, {Process, Kernel, false}, {Kernel, Process, true}, {None, Process, false}} {
		if got := tc.l.AtLeast(tc.min); got != tc.want {
			t.Errorf("%s.AtLeast(%s) = %v", tc.l, tc.min, got)
		}
	}
	for _, s := range []string{"none", "process", "kernel"} {
		if l, err := ParseLevel(s); err != nil || string(l) != s {
			t.Errorf("ParseLevel(%q) = %q, %v", s, l, err)
		}
	}
	if _, err := ParseLevel("strong"); err == nil {
		t.Error("ParseLevel(strong) accepted")
	}
}
