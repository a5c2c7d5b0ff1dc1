package nvml

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/vfio"
)

// The passthrough fixture (testdata/vfio/hgx-h100-passed): two H100 SXM
// GPUs, each behind a root port and a PCIe switch's upstream and
// downstream ports, laid out as the kernel's sysfs has them
// (Documentation/ABI/testing/sysfs-bus-pci, sysfs-kernel-iommu_groups).
// The first is on nvidia, alone in group 27; the second is bound to
// vfio-pci with driver_override vfio-pci, and its group 39 also holds its
// switch downstream port (a bridge, which may share a passed group).
// TestGenerateVFIOFixture holds the committed tree equal to this
// (TESSERA_REGEN_FIXTURES=1 rewrites it).

const vfioFixture = "testdata/vfio/hgx-h100-passed"

type fxFn struct {
	path                          string // below sys/devices
	class, vendor, device, driver string
	override                      string
	group, numa                   int
}

func vfioFixtureFunctions() []fxFn {
	bridge := func(path string, group, numa int) fxFn {
		return fxFn{path: path, class: "0x060400", vendor: "0x1000", device: "0xc030", driver: "pcieport", group: group, numa: numa}
	}
	return []fxFn{
		bridge("pci0000:15/0000:15:01.0", 20, 0),
		bridge("pci0000:15/0000:15:01.0/0000:16:00.0", 21, 0),
		bridge("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0", 22, 0),
		{path: "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", class: "0x030200", vendor: "0x10de", device: "0x2330", driver: "nvidia", group: 27},
		bridge("pci0000:28/0000:28:01.0", 32, 0),
		bridge("pci0000:28/0000:28:01.0/0000:29:00.0", 33, 0),
		bridge("pci0000:28/0000:28:01.0/0000:29:00.0/0000:2a:00.0", 39, 0),
		{path: "pci0000:28/0000:28:01.0/0000:29:00.0/0000:2a:00.0/0000:2b:00.0", class: "0x030200", vendor: "0x10de", device: "0x2330", driver: "vfio-pci", override: "vfio-pci", group: 39},
	}
}

func writeVFIOFixture(dir string) error {
	var errs []string
	file := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			errs = append(errs, err.Error())
		} else if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			errs = append(errs, err.Error())
		}
	}
	link := func(rel, target string) {
		p := filepath.Join(dir, rel)
		r, err := filepath.Rel(filepath.Dir(p), filepath.Join(dir, target))
		if err == nil {
			err = os.MkdirAll(filepath.Dir(p), 0o755)
		}
		if err == nil {
			err = os.Symlink(r, p)
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	drivers := map[string]bool{"vfio-pci": true}
	for _, f := range vfioFixtureFunctions() {
		addr := filepath.Base(f.path)
		dev := "sys/devices/" + f.path
		override := f.override
		if override == "" {
			override = "(null)"
		}
		for name, v := range map[string]string{"class": f.class, "vendor": f.vendor, "device": f.device, "numa_node": fmt.Sprint(f.numa), "driver_override": override} {
			file(dev+"/"+name, v+"\n")
		}
		link("sys/bus/pci/devices/"+addr, dev)
		group := fmt.Sprintf("sys/kernel/iommu_groups/%d", f.group)
		link(dev+"/iommu_group", group)
		link(group+"/devices/"+addr, dev)
		drv := "sys/bus/pci/drivers/" + f.driver
		link(dev+"/driver", drv)
		link(drv+"/"+addr, dev)
		drivers[f.driver] = true
	}
	for d := range drivers {
		file("sys/bus/pci/drivers/"+d+"/bind", "")
		file("sys/bus/pci/drivers/"+d+"/unbind", "")
	}
	file("sys/bus/pci/drivers_probe", "")
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// TestGenerateVFIOFixture: the committed tree is what the generator writes.
func TestGenerateVFIOFixture(t *testing.T) {
	dir := vfioFixture
	if os.Getenv("TESSERA_REGEN_FIXTURES") != "1" {
		dir = t.TempDir()
	} else if err := os.RemoveAll(filepath.Join(dir, "sys")); err != nil {
		t.Fatal(err)
	}
	if err := writeVFIOFixture(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := listTree(t, filepath.Join(dir, "sys")), listTree(t, filepath.Join(vfioFixture, "sys")); !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs from the generator (TESSERA_REGEN_FIXTURES=1 rewrites it)", vfioFixture)
	}
}

func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" -> "+target)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, rel+": "+string(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestSysfsBesideVFIO: the backend's own sysfs reading (PCIe root and
// bridges, NUMA node) and internal/vfio's (drivers, groups) read one host
// alike, the GPU vfio-pci holds as the one on nvidia.
func TestSysfsBesideVFIO(t *testing.T) {
	s := sysfs{root: vfioFixture}
	for _, tc := range []struct{ bdf, root, driver string }{
		{"0000:18:00.0", "pci0000:15", "nvidia"},
		{"0000:2b:00.0", "pci0000:28", "vfio-pci"},
	} {
		root, bridges, err := s.pcieChain(tc.bdf)
		if err != nil || root != tc.root || len(bridges) != 3 {
			t.Errorf("%s: chain %s %v %v", tc.bdf, root, bridges, err)
		}
		if n, err := s.numaNode(tc.bdf); err != nil || n != 0 {
			t.Errorf("%s: NUMA node %d %v", tc.bdf, n, err)
		}
		if d, err := vfio.DriverOf(vfio.HostSysfs(filepath.Join(vfioFixture, "sys")), tc.bdf); err != nil || d != tc.driver {
			t.Errorf("%s: driver %q %v, want %s", tc.bdf, d, err, tc.driver)
		}
	}
	groups, why, err := vfio.Passable(vfio.HostSysfs(filepath.Join(vfioFixture, "sys")), []string{"0000:18:00.0", "0000:2b:00.0"})
	if err != nil || len(why) != 0 || !reflect.DeepEqual(groups, map[string]int{"0000:18:00.0": 27, "0000:2b:00.0": 39}) {
		t.Errorf("Passable = %v, %v, %v; want groups 27 and 39 (a bridge shares 39)", groups, why, err)
	}
}
