package amdsysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The passthrough fixtures (testdata/vfio): synthesized hosts whose PCI
// side has what internal/vfio reads, laid out as the kernel's sysfs has it
// (Documentation/ABI/testing/sysfs-bus-pci, sysfs-kernel-iommu_groups):
// each function's class, driver link and driver_override ("(null)" when
// none), its iommu_group link and the group's devices/ links, and the
// drivers' directories with bind and unbind. A card vfio-pci holds has no
// KFD node and no DRM nodes: amdgpu let it go. TestGenerateVFIOFixtures
// holds the committed trees equal to what this writes
// (TESSERA_REGEN_FIXTURES=1 rewrites them), as TestGenerateFixtures does
// for test/fixtures/amd.

const vfioFixturesDir = "testdata/vfio"

// fxFunction is one PCI function of a passthrough fixture.
type fxFunction struct {
	card     int    // index into the machine's cards; -1: not a card's GPU
	addr     string // for a function that is not a card's GPU
	class    string
	vendor   string
	driver   string // bound driver; "" none
	override string // driver_override; "" none
	group    int
}

// fxVFIOMachine is a host of cards, some passed through.
type fxVFIOMachine struct {
	base fxMachine
	fns  []fxFunction
}

func vfioFixtureMachines() []fxVFIOMachine {
	mi210 := func(bus, root, numa int, id uint64) fxCard {
		return fxCard{bus: bus, root: root, numa: numa, deviceID: 0x740f, gfx: 90010, simdPerCU: 4, cusPerNode: 104, memPerNode: 68702699520, xccPerNode: 1, parts: 1, uniqueID: id}
	}
	w7900 := fxCard{bus: 0x03, root: 0x00, numa: -1, deviceID: 0x7448, gfx: 110000, simdPerCU: 2, cusPerNode: 96, memPerNode: 48 << 30, xccPerNode: 1, parts: 1, uniqueID: 0x6f1e2d3c4b5a6978}
	return []fxVFIOMachine{
		// Two MI210s, each alone in its group behind its root port; the
		// second passed through to a virtual machine.
		{base: fxMachine{name: "mi210-passed", cpus: 2, driver: "6.7.0", pciDirs: true,
			cards: []fxCard{mi210(0x63, 0x60, 0, 0x1901d3a8b1c2e6a6), mi210(0xe3, 0xe0, 1, 0x1901d3a8b1c2e7b7)}},
			fns: []fxFunction{
				{card: 0, class: "0x038000", vendor: "0x1002", driver: "amdgpu", group: 30},
				{card: 1, class: "0x038000", vendor: "0x1002", driver: "vfio-pci", override: "vfio-pci", group: 54},
			}},
		// A workstation card and its HDMI audio function: one slot, one
		// group, passed together.
		{base: fxMachine{name: "w7900-audio", cpus: 1, pciDirs: true, cards: []fxCard{w7900}},
			fns: []fxFunction{
				{card: 0, class: "0x030000", vendor: "0x1002", driver: "amdgpu", group: 12},
				{card: -1, addr: "0000:03:00.1", class: "0x040300", vendor: "0x1002", driver: "snd_hda_intel", group: 12},
			}},
	}
}

// write lays out m: the base machine with only its cards on amdgpu, then
// every function's PCI side.
func (m fxVFIOMachine) write(dir string) error {
	base := m.base
	base.cards = nil
	for _, f := range m.fns {
		if f.card >= 0 && f.driver == "amdgpu" {
			base.cards = append(base.cards, m.base.cards[f.card])
		}
	}
	if err := base.write(dir); err != nil {
		return err
	}
	w := &fxWriter{dir: dir}
	drivers := map[string]bool{"vfio-pci": true}
	for _, f := range m.fns {
		m.function(w, f)
		if f.driver != "" {
			drivers[f.driver] = true
		}
	}
	for d := range drivers {
		w.file("sys/bus/pci/drivers/"+d+"/bind", "")
		w.file("sys/bus/pci/drivers/"+d+"/unbind", "")
	}
	w.file("sys/bus/pci/drivers_probe", "")
	return w.err
}

// function writes one function's PCI side.
func (m fxVFIOMachine) function(w *fxWriter, f fxFunction) {
	c := m.base.cards[max(f.card, 0)]
	addr := f.addr
	if f.card >= 0 {
		addr = fmt.Sprintf("%04x:%02x:00.0", c.domain, c.bus)
	}
	dev := fmt.Sprintf("sys/devices/pci%04x:%02x/%04x:%02x:01.0/%s", c.domain, c.root, c.domain, c.root, addr)
	if f.card < 0 || f.driver != "amdgpu" {
		// The base machine wrote only its amdgpu cards' directories.
		w.file(dev+"/vendor", f.vendor+"\n")
		w.file(dev+"/numa_node", fmt.Sprintf("%d\n", c.numa))
		if f.card >= 0 {
			w.file(dev+"/device", fmt.Sprintf("0x%04x\n", c.deviceID))
		}
		w.link("sys/bus/pci/devices/"+addr, "../../../../"+dev)
	}
	w.file(dev+"/class", f.class+"\n")
	override := f.override
	if override == "" {
		override = "(null)"
	}
	w.file(dev+"/driver_override", override+"\n")
	group := fmt.Sprintf("sys/kernel/iommu_groups/%d", f.group)
	w.link(dev+"/iommu_group", relTo(dev, group))
	w.link(group+"/devices/"+addr, relTo(group+"/devices", dev))
	if f.driver != "" {
		drv := "sys/bus/pci/drivers/" + f.driver
		w.link(dev+"/driver", relTo(dev, drv))
		w.link(drv+"/"+addr, relTo(drv, dev))
	}
}

// relTo is target relative to the directory from (both below the root).
func relTo(from, target string) string {
	r, err := filepath.Rel(from, target)
	if err != nil {
		panic(err)
	}
	return r
}

// TestGenerateVFIOFixtures: the committed passthrough fixtures are what
// the generator writes.
func TestGenerateVFIOFixtures(t *testing.T) {
	regen := os.Getenv("TESSERA_REGEN_FIXTURES") == "1"
	for _, m := range vfioFixtureMachines() {
		committed := filepath.Join(vfioFixturesDir, m.base.name)
		dir := committed
		if !regen {
			dir = filepath.Join(t.TempDir(), m.base.name)
		}
		if err := os.RemoveAll(filepath.Join(dir, "sys")); err != nil {
			t.Fatal(err)
		}
		if err := m.write(dir); err != nil {
			t.Fatal(err)
		}
		if !regen {
			compareTrees(t, filepath.Join(dir, "sys"), filepath.Join(committed, "sys"))
		}
	}
	if !slices.ContainsFunc(vfioFixtureMachines(), func(m fxVFIOMachine) bool { return m.base.name == "mi210-passed" }) {
		t.Fatal("mi210-passed is gone: the passthrough tests read it")
	}
}
