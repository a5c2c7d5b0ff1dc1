package amdsysfs

import "fmt"

// pciModel is what Tessera publishes for one AMD PCI device ID.
type pciModel struct {
	Model       string // short and stable, the `model` attribute
	ProductName string // market name, the `productName` attribute
}

// pciModels maps PCI device IDs (vendor 0x1002) to models. Each ID is
// checked against the PCI ID Repository (pci.ids, pci-ids.ucw.cz, vendor
// 1002) and the Linux kernel's amdgpu PCI ID list
// (drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c, pciidlist; newer GPUs are
// matched there by class and found through IP discovery, so pci.ids is the
// naming source for them). KFD prints the ID in decimal (device_id 29858 is
// 0x74a2); the PCI sysfs file prints it as 0x74a2.
var pciModels = map[uint16]pciModel{
	0x738c: {"MI100", "AMD Instinct MI100"},                 // pci.ids: Arcturus GL-XL [Instinct MI100]; amdgpu_drv.c CHIP_ARCTURUS
	0x740c: {"MI250X", "AMD Instinct MI250X"},               // pci.ids: Aldebaran/MI200 [Instinct MI250X/MI250]; refined by CU count (modelFor)
	0x740f: {"MI210", "AMD Instinct MI210"},                 // pci.ids: Aldebaran/MI200 [Instinct MI210]; real KFD dump in ROCm/k8s-device-plugin testdata/topo-mi210-xgmi-pcie
	0x74a0: {"MI300A", "AMD Instinct MI300A"},               // pci.ids: Aqua Vanjaram [Instinct MI300A]
	0x74a1: {"MI300X", "AMD Instinct MI300X"},               // pci.ids: Aqua Vanjaram [Instinct MI300X]
	0x74a2: {"MI308X", "AMD Instinct MI308X"},               // pci.ids: Aqua Vanjaram [Instinct MI308X]; real KFD dump in test/fixtures/amd/mi308x-cpx
	0x74a5: {"MI325X", "AMD Instinct MI325X"},               // pci.ids: Aqua Vanjaram [Instinct MI325X]
	0x74a9: {"MI300X", "AMD Instinct MI300X HF"},            // pci.ids: Aqua Vanjaram [Instinct MI300X HF]
	0x7448: {"Radeon PRO W7900", "AMD Radeon PRO W7900"},    // pci.ids: Navi 31 [Radeon Pro W7900]
	0x744c: {"Radeon RX 7900", "AMD Radeon RX 7900 XT/XTX"}, // pci.ids: Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]
}

// mi250CUsPerGCD and mi250xCUsPerGCD tell MI250 from MI250X, which share
// device ID 0x740c: 104 CUs per GCD on MI250, 110 on MI250X (ROCm "GPU
// specifications": MI250 208 CUs, MI250X 220 CUs, two GCDs each).
const (
	mi250CUsPerGCD  = 104
	mi250xCUsPerGCD = 110
)

// modelFor returns the model of a device ID, refined by what KFD counts.
// why says, when it is not empty, why the ID names no model: the table
// does not know it, or the CU count (0: unknown) does not settle which of
// the models sharing it this is.
func modelFor(deviceID uint16, cus int64) (m pciModel, why string) {
	m, ok := pciModels[deviceID]
	if !ok {
		// The PCI ID (vendor:device, as lspci -n prints it) is what an
		// operator looks up, and what a new table entry needs.
		return pciModel{}, fmt.Sprintf("device ID 0x%04x (PCI ID 1002:%04x) not in the model table", deviceID, deviceID)
	}
	if deviceID == 0x740c {
		switch cus {
		case mi250CUsPerGCD:
			return pciModel{"MI250", "AMD Instinct MI250"}, ""
		case mi250xCUsPerGCD:
			return m, ""
		}
		count := fmt.Sprintf("KFD counts %d", cus)
		if cus == 0 {
			count = "KFD gives no CU count"
		}
		return pciModel{}, fmt.Sprintf("device ID 0x740c is an MI250 (%d CUs per GCD) or an MI250X (%d), and %s", mi250CUsPerGCD, mi250xCUsPerGCD, count)
	}
	return m, ""
}
