//go:build cgo && linux

package nvml

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// What NVML really answers on real nodes, one answer per case, and what
// Discover makes of it (issue #43).

// Unknown is not zero: an SM count NVML does not report is left out, the
// computeUnits capacity with it, and the GPU stays healthy; only a call
// that fails otherwise degrades it.
func TestSMCountAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cores   func() (int, nvml.Return)
		want    int64 // ComputeUnits
		healthy bool
	}{
		{"cores reported", func() (int, nvml.Return) { return 132 * 128, nvml.SUCCESS }, 132, true},
		{"NOT_SUPPORTED", func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }, 0, true},
		{"FUNCTION_NOT_FOUND (older driver)", func() (int, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }, 0, true},
		{"cores not a multiple of the SM width", func() (int, nvml.Return) { return 1000, nvml.SUCCESS }, 0, true},
		{"call fails", func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := newMachine(t, gpus.Multiple(1, gpus.H100_SXM5_80GB), dgxSlots()[:1])
			s.Devices[0].(*server.Device).GetNumGpuCoresFunc = tc.cores
			n, err := newBackend(t, s, root).Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			g := n.GPUs[0]
			if g.ComputeUnits != tc.want || (g.Health.State == inventory.Healthy) != tc.healthy {
				t.Errorf("computeUnits %d health %+v, want %d healthy=%v", g.ComputeUnits, g.Health, tc.want, tc.healthy)
			}
			for _, sharing := range []publish.Sharing{publish.SharingNone, publish.SharingCapacity} {
				res, err := publish.Build("n", n, publish.Options{Partitioning: publish.Static, Sharing: sharing})
				if err != nil {
					t.Fatal(err)
				}
				c, ok := devices(res)["gpu-0"].Capacity[publish.CapComputeUnits]
				if ok != (tc.want > 0) || (ok && c.Value.Value() != tc.want) {
					t.Errorf("sharing %s: computeUnits capacity %v (present %v), want %d and never 0", sharing, c.Value.String(), ok, tc.want)
				}
			}
		})
	}
}

// MIG on with no profile to publish: the GPU publishes nothing, and says
// so (Node.Unpublished, which the agent counts).
func TestMIGOnWithoutProfiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		profiles func(int) (nvml.GpuInstanceProfileInfo, nvml.Return)
		migOn    bool
		want     []inventory.UnpublishedReason
	}{
		{"MIG on, every profile NOT_SUPPORTED", notSupportedProfile, true, []inventory.UnpublishedReason{inventory.UnpublishedNoProfiles}},
		{"MIG on, profile table empty (INVALID_ARGUMENT)", func(int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}, true, []inventory.UnpublishedReason{inventory.UnpublishedNoProfiles}},
		{"MIG off, no profiles: published whole", notSupportedProfile, false, nil},
		{"MIG on with the mock's profiles: nothing to say", nil, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := newMachine(t, gpus.Multiple(1, gpus.A100_SXM4_40GB), dgxA100Slots()[:1])
			d := s.Devices[0].(*server.Device)
			if tc.migOn {
				d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
			}
			if tc.profiles != nil {
				d.GetGpuInstanceProfileInfoFunc = tc.profiles
			}
			n, err := newBackend(t, s, root).Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []inventory.UnpublishedReason
			for _, u := range n.Unpublished {
				got = append(got, u.Reason)
				if u.GPU != d.UUID || u.Message == "" {
					t.Errorf("unpublished %+v: want the GPU's UUID and why", u)
				}
			}
			if strings.Join(reasons(got), ",") != strings.Join(reasons(tc.want), ",") {
				t.Errorf("unpublished %v, want %v", got, tc.want)
			}
			// Dynamic: a MIG GPU with profiles publishes its placements
			// even before anything is cut.
			res, err := publish.Build("n", n, publish.Options{Partitioning: publish.Dynamic})
			if err != nil {
				t.Fatal(err)
			}
			if published := len(res.Order) > 0; published == (len(tc.want) > 0) {
				t.Errorf("devices %v; the GPU is reported unpublished: %v", res.Order, len(tc.want) > 0)
			}
		})
	}
}

func notSupportedProfile(int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
}

func reasons(rs []inventory.UnpublishedReason) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, string(r))
	}
	return out
}

// speedField answers NVML_FI_DEV_NVLINK_GET_SPEED per link: mbps(link),
// or the per-field return it gives.
func speedField(mbps func(link uint32) (uint32, nvml.Return)) func([]nvml.FieldValue) nvml.Return {
	return func(vals []nvml.FieldValue) nvml.Return {
		for i := range vals {
			if vals[i].FieldId != nvml.FI_DEV_NVLINK_GET_SPEED {
				vals[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			v, ret := mbps(vals[i].ScopeId)
			vals[i].NvmlReturn = uint32(ret)
			vals[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.LittleEndian.PutUint32(vals[i].Value[:4], v)
		}
		return nvml.SUCCESS
	}
}

// The link speed NVML reports per link is what is counted; the nominal
// figure of the link's NVLink version only where the field does not answer.
func TestNVLinkSpeedField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields func([]nvml.FieldValue) nvml.Return
		want   int64 // fabricBandwidthGBps of each H100
	}{
		// nvidia-smi nvlink -s on an H100: 26.562 GB/s per link.
		{"every link answers", speedField(func(uint32) (uint32, nvml.Return) { return 26562, nvml.SUCCESS }), 478},
		{"call NOT_SUPPORTED: nominal 25 GB/s per NVLink 4 link", func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }, 450},
		{"links 0-8 answer, 9-17 NOT_SUPPORTED", speedField(func(l uint32) (uint32, nvml.Return) {
			if l < 9 {
				return 26562, nvml.SUCCESS
			}
			return 0, nvml.ERROR_NOT_SUPPORTED
		}), (9*26562 + 9*25000) / 1000},
		{"a zero speed is no answer", speedField(func(uint32) (uint32, nvml.Return) { return 0, nvml.SUCCESS }), 450},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := newMachine(t, gpus.Multiple(2, gpus.H100_SXM5_80GB), dgxSlots()[:2])
			nvswitchFabric(s, 18, uint32(nvml.NVLINK_VERSION_4_0))
			for _, dev := range s.Devices {
				dev.(*server.Device).GetFieldValuesFunc = tc.fields
			}
			n, err := newBackend(t, s, root).Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			res, err := publish.Build("n", n, publish.Options{Partitioning: publish.Static})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range res.Order {
				a := devices(res)[name].Attributes[resourceapi.QualifiedName(publish.AttrFabricBandwidth)]
				if a.IntValue == nil || *a.IntValue != tc.want {
					t.Errorf("%s fabricBandwidthGBps %v, want %d", name, a.IntValue, tc.want)
				}
			}
		})
	}
}
