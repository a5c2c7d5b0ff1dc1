package amdsysfs

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/internal/vfio"
)

// TestPassedCardNotDiscovered: on a host where vfio-pci holds one of two
// MI210s (testdata/vfio/mi210-passed), KFD lists only the other, and so
// does the backend: no error, nothing said unpublished, the passed card
// absent as NVML's GPUs are once unbound (the agent keeps its name,
// internal/publish's Passed).
func TestPassedCardNotDiscovered(t *testing.T) {
	n := discover(t, filepath.Join(vfioFixturesDir, "mi210-passed"))
	if len(n.GPUs) != 1 || n.GPUs[0].PCIBusID != "0000:63:00.0" {
		t.Fatalf("discovered %+v, want the MI210 at 0000:63:00.0 alone", n.GPUs)
	}
	if len(n.Unpublished) != 0 {
		t.Errorf("unpublished %+v, want none: the passed card is not lost", n.Unpublished)
	}
}

// TestVFIOReadsAMDHosts: internal/vfio reads these hosts' IOMMU groups and
// bindings as the kernel lays them out: which card vfio-pci holds, what
// each group holds, and a card whose audio function shares its slot.
func TestVFIOReadsAMDHosts(t *testing.T) {
	s := vfio.HostSysfs(filepath.Join(vfioFixturesDir, "mi210-passed", "sys"))
	if err := vfio.Ready(s); err != nil {
		t.Fatal(err)
	}
	passed, err := vfio.ReadFunction(s, "0000:e3:00.0")
	if err != nil {
		t.Fatal(err)
	}
	if passed.Driver != "vfio-pci" || passed.Override != "vfio-pci" || !passed.Display() || passed.Vendor != "0x1002" {
		t.Errorf("the passed MI210 reads %+v", passed)
	}
	groups, why, err := vfio.Passable(s, []string{"0000:63:00.0", "0000:e3:00.0"})
	if err != nil || len(why) != 0 || !reflect.DeepEqual(groups, map[string]int{"0000:63:00.0": 30, "0000:e3:00.0": 54}) {
		t.Errorf("Passable = %v, %v, %v", groups, why, err)
	}

	w := vfio.HostSysfs(filepath.Join(vfioFixturesDir, "w7900-audio", "sys"))
	plan, err := vfio.Plan(w, []string{"0000:03:00.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := []vfio.Function{
		{Address: "0000:03:00.0", Class: 0x030000, Vendor: "0x1002", Driver: "amdgpu"},
		{Address: "0000:03:00.1", Class: 0x040300, Vendor: "0x1002", Driver: "snd_hda_intel"},
	}
	if len(plan) != 1 || plan[0].Group != 12 || !reflect.DeepEqual(plan[0].Functions, want) {
		t.Errorf("Plan = %+v, want group 12 with %+v", plan, want)
	}
}
