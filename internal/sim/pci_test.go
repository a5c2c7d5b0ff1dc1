package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// TestCatalogueIOMMUGroups: every GPU of the catalogue can be passed alone
// but the second T4 of mixed-inference, whose group holds a NIC.
func TestCatalogueIOMMUGroups(t *testing.T) {
	for _, name := range CatalogNames() {
		t.Run(name, func(t *testing.T) {
			m := mustProfile(t, name)
			b, _ := newBackend(t, m)
			for _, g := range m.Node.GPUs {
				_, err := vfio.Plan(b.PCISysfs(), []string{g.PCIBusID})
				stuck := name == "mixed-inference" && g.PCIBusID == "0000:98:00.0"
				switch {
				case stuck && (err == nil || !strings.Contains(err.Error(), "0000:99:00.0 (class 0x020000, mlx5_core)")):
					t.Errorf("GPU %s shares its group with a NIC: Plan = %v", g.PCIBusID, err)
				case !stuck && err != nil:
					t.Errorf("GPU %s: %v", g.PCIBusID, err)
				}
			}
		})
	}
}

// TestPassedGPULeavesTheDriversView: a GPU bound to vfio-pci through the
// backend's sysfs is what NVML would no longer see: Discover and
// telemetry leave it out (the other GPUs' links renumbered), the driver
// refuses to carve it, its group's node is in the device tree with the
// numbers DeviceNumbers gives, and the generation moved. The binding
// outlives a new backend of the same boot, not a reboot.
func TestPassedGPULeavesTheDriversView(t *testing.T) {
	ctx := context.Background()
	m := mustProfile(t, "dgx-h100")
	b, dir := newBackend(t, m)
	gen, _ := b.Generation()
	g := m.Node.GPUs[3]
	group, ok := m.IOMMUGroup(g.PCIBusID)
	if !ok {
		t.Fatalf("GPU %s has no IOMMU group", g.PCIBusID)
	}
	if err := vfio.Bind(b.PCISysfs(), g.PCIBusID, nil); err != nil {
		t.Fatal(err)
	}
	n := discover(t, b)
	if len(n.GPUs) != 7 || gpuIndex(n, g.UUID) >= 0 {
		t.Fatalf("Discover lists %d GPUs (the passed one: %v), want 7 without it", len(n.GPUs), gpuIndex(n, g.UUID) >= 0)
	}
	for _, l := range n.Links {
		if l.A >= 7 {
			t.Errorf("link %+v names a GPU past the 7 listed", l)
		}
	}
	if len(n.Links) != 7 {
		t.Errorf("%d NVSwitch links, want one per listed GPU", len(n.Links))
	}
	samples, err := b.ReadTelemetry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if s.UUID == g.UUID {
			t.Error("telemetry reads the passed GPU")
		}
	}
	if _, err := b.CreatePartition(ctx, g.UUID, "1g.10gb", inventory.Placement{Start: 0}); !errors.Is(err, errNotOnDriver) {
		t.Errorf("carving the passed GPU: %v, want errNotOnDriver", err)
	}
	node := vfio.GroupNode(group)
	if _, err := os.Stat(filepath.Join(b.DevRoot(), node)); err != nil {
		t.Errorf("group node: %v", err)
	}
	if major, minor, ok := b.DeviceNumbers("/dev/" + node); !ok || major != vfioGroupMajor || minor != int64(group) {
		t.Errorf("DeviceNumbers(%s) = %d:%d %v", node, major, minor, ok)
	}
	if now, _ := b.Generation(); now == gen {
		t.Error("the generation did not move with the binding")
	}

	again, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := discover(t, again); len(n.GPUs) != 7 {
		t.Errorf("restarted in the same boot: %d GPUs, want 7 (still passed)", len(n.GPUs))
	}
	if _, err := os.Stat(filepath.Join(again.DevRoot(), node)); err != nil {
		t.Errorf("restarted in the same boot: group node: %v", err)
	}
	rebooted, err := New(m, dir, WithBootID("boot-2"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := discover(t, rebooted); len(n.GPUs) != 8 {
		t.Errorf("rebooted: %d GPUs, want 8 (back on nvidia)", len(n.GPUs))
	}
	if _, err := os.Stat(filepath.Join(rebooted.DevRoot(), node)); err == nil {
		t.Error("rebooted: the group node is still there")
	}
}

func gpuIndex(n *inventory.Node, uuid string) int {
	for i, g := range n.GPUs {
		if g.UUID == uuid {
			return i
		}
	}
	return -1
}

// TestMachinePCI: the file's iommu and pciDevices, and what it gets wrong.
func TestMachinePCI(t *testing.T) {
	base := `
name: box
driverVersion: "580.65.06"
gpuTypes:
  t4: {vendor: nvidia, model: T4, productName: Tesla T4, architecture: turing, computeCapability: "7.5", memory: 15Gi, computeUnits: 40}
`
	off, err := LoadMachine("box.yaml", []byte(base+"iommu: false\ngpus:\n  - {type: t4}\n"), "n")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := off.IOMMUGroup(off.Node.GPUs[0].PCIBusID); ok || off.PCI.IOMMU {
		t.Error("iommu: false still gives the GPU a group")
	}
	shared, err := LoadMachine("box.yaml", []byte(base+"gpus:\n  - {type: t4, iommuGroup: 9}\n  - {type: t4, iommuGroup: 9}\n  - {type: t4}\n"), "n")
	if err != nil {
		t.Fatal(err)
	}
	g0, _ := shared.IOMMUGroup(shared.Node.GPUs[0].PCIBusID)
	g1, _ := shared.IOMMUGroup(shared.Node.GPUs[1].PCIBusID)
	g2, _ := shared.IOMMUGroup(shared.Node.GPUs[2].PCIBusID)
	if g0 != 9 || g1 != 9 || g2 == 9 {
		t.Errorf("groups %d %d %d, want 9 9 and another", g0, g1, g2)
	}
	_, err = LoadMachine("box.yaml", []byte(base+`gpus:
  - {type: t4, iommuGroup: -2}
pciDevices:
  - {pciBusID: "0000:10:00.0", class: "0x020000", vendor: "0x15b3", driver: mlx5_core, iommuGroup: 3}
  - {pciBusID: "0000:99:00.0", class: "nic", vendor: "15b3", driver: mlx5_core}
`), "n")
	for _, want := range []string{
		"line 7: gpus[0].iommuGroup: -2 is not a group number",
		"line 9: pciDevices[0].pciBusID: 0000:10:00.0 is already used by gpus[0]",
		"line 10: pciDevices[1].iommuGroup: is required",
		`line 10: pciDevices[1].class: "nic" is not a PCI class code`,
		`line 10: pciDevices[1].vendor: "15b3" is not a PCI vendor ID`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
