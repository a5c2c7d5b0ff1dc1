package sim

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// The NVL72 trays: their 4 GPUs are one NVSwitch island and carry the
// fabric domain of the real capture's clique, on the inventory and as the
// published fabricDomain attribute.
func TestNVL72TrayFabric(t *testing.T) {
	for _, tc := range []struct{ machine, domain string }{
		{"gb200-nvl72-tray", "00000001-0000-0000-0000-000000000001.2"},
		{"gb300-nvl72-tray", "00000003-0000-0000-0000-000000000003.32766"},
	} {
		t.Run(tc.machine, func(t *testing.T) { checkTray(t, tc.machine, tc.domain) })
	}
}

func checkTray(t *testing.T, machine, domain string) {
	m := mustProfile(t, machine)
	f, err := fabric.Compute(&m.Node)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Node.GPUs) != 4 {
		t.Fatalf("%d GPUs, want 4", len(m.Node.GPUs))
	}
	res, err := publish.Build("node-a", &m.Node, publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	devs := map[string]bool{}
	for _, s := range res.Resources.Pools["node-a"].Slices {
		for _, d := range s.Devices {
			a := d.Attributes[publish.AttrFabricDomain]
			if a.StringValue == nil || *a.StringValue != domain {
				t.Errorf("%s fabricDomain %v, want %s", d.Name, a.StringValue, domain)
			}
			devs[d.Name] = true
		}
	}
	for i, g := range m.Node.GPUs {
		if f[i].Kind != inventory.LinkNVSwitch || f[i].Island != f[0].Island || len(f[i].Members) != 4 || f[i].BandwidthGBps != 900 {
			t.Errorf("GPU %d fabric %+v, want one nvswitch island of 4 at 900 GB/s", i, f[i])
		}
		if g.FabricDomain != domain {
			t.Errorf("GPU %d fabric domain %q", i, g.FabricDomain)
		}
	}
	if len(devs) != 4 {
		t.Errorf("published %v, want 4 GPUs", devs)
	}
}

// A plane's fabric is checked as NVML would report it.
func TestSwitchPlaneFabricErrors(t *testing.T) {
	for _, tc := range []struct{ fabric, want string }{
		{"{clusterUUID: 00000000-0000-0000-0000-000000000000, cliqueID: 0}", "all zeros"},
		{"{clusterUUID: not-a-uuid, cliqueID: 2}", "not a UUID"},
		{"{clusterUUID: 00000001-0000-0000-0000-000000000001}", "cliqueID"},
		{"{clusterUUID: 00000001-0000-0000-0000-000000000001, cliqueID: -1}", "cliqueID"},
	} {
		y := `name: t
driverVersion: "580.65.06"
gpuTypes:
  g: {vendor: nvidia, model: B200, productName: NVIDIA B200, architecture: blackwell, computeCapability: "10.0", memory: 180Gi, computeUnits: 148}
gpus:
  - {type: g, pciBusID: "0000:01:00.0"}
links:
  nvswitch:
    - {plane: p, bandwidthGBps: 900, fabric: ` + tc.fabric + `}
`
		_, err := LoadMachine("t", []byte(y), "node-a")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fabric %s: %v, want an error about %q", tc.fabric, err, tc.want)
		}
	}
}
