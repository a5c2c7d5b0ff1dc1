//go:build cgo && linux

package nvml

import (
	"context"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/tessera-gpu/tessera/internal/health"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

func lostMemory() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
func lostUUID() (string, nvml.Return)        { return "", nvml.ERROR_GPU_IS_LOST }

// A GPU answering ERROR_GPU_IS_LOST: published tainted NoExecute where it
// can be named (its identity answered, or was read at an earlier
// discovery), left out and counted where it cannot.
func TestLostGPUAtDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before is applied after a first, clean discovery (nil: none).
		before, lose func(d *server.Device)
		published    bool // GPU 1 is in the inventory, tainted
		unpublished  inventory.UnpublishedReason
	}{
		{"identity answers, memory is lost", nil, func(d *server.Device) { d.GetMemoryInfoFunc = lostMemory }, true, ""},
		{"lost before it was ever named", nil, func(d *server.Device) { d.GetUUIDFunc = lostUUID }, false, inventory.UnpublishedLost},
		{"lost after an earlier discovery named it", func(*server.Device) {}, func(d *server.Device) {
			d.GetUUIDFunc = lostUUID
			d.GetMemoryInfoFunc = lostMemory
		}, true, ""},
		{"identity fails otherwise", nil, func(d *server.Device) {
			d.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
		}, false, inventory.UnpublishedUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := newMachine(t, gpus.Multiple(2, gpus.H100_SXM5_80GB), dgxSlots()[:2])
			nvswitchFabric(s, 18, uint32(nvml.NVLINK_VERSION_4_0))
			d := s.Devices[1].(*server.Device)
			uuid := d.UUID
			b := newBackend(t, s, root)
			if tc.before != nil {
				if _, err := b.Discover(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			tc.lose(d)
			n, err := b.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got *inventory.GPU
			for i := range n.GPUs {
				if n.GPUs[i].PCIBusID == "0000:2a:00.0" {
					got = &n.GPUs[i]
				}
			}
			if (got != nil) != tc.published {
				t.Fatalf("lost GPU published %v, want %v (unpublished %+v)", got != nil, tc.published, n.Unpublished)
			}
			if tc.published {
				checkLostPublished(t, n, got, uuid)
			}
			if len(n.Unpublished) != len(reasonsOf(tc.unpublished)) || (len(n.Unpublished) == 1 && n.Unpublished[0].Reason != tc.unpublished) {
				t.Errorf("unpublished %+v, want reason %q", n.Unpublished, tc.unpublished)
			}
		})
	}
}

// checkLostPublished: a lost GPU keeps its name, reaches nobody over
// NVLink, and its discovery verdict becomes a NoExecute taint on its
// device, which publishes with no memory capacity rather than 0.
func checkLostPublished(t *testing.T, n *inventory.Node, g *inventory.GPU, uuid string) {
	t.Helper()
	if g.UUID != uuid || !g.Health.Lost || !strings.Contains(g.Health.Reason, "ERROR_GPU_IS_LOST") {
		t.Errorf("lost GPU %s health %+v", g.UUID, g.Health)
	}
	for _, l := range n.Links {
		if l.A == 1 {
			t.Errorf("a lost GPU keeps a link: %+v", l)
		}
	}
	tr := health.NewTracker(health.DefaultPolicy())
	for _, g := range n.GPUs {
		tr.Discovered(g.UUID, g.Health)
	}
	for _, sharing := range []publish.Sharing{publish.SharingNone, publish.SharingCapacity} {
		res, err := publish.Build("n", n, publish.Options{Partitioning: publish.Static, Sharing: sharing, Taints: tr.Taints})
		if err != nil {
			t.Fatalf("sharing %s: %v", sharing, err)
		}
		dev := devices(res)["gpu-1"]
		if len(dev.Taints) != 1 || dev.Taints[0].Key != health.KeyDiscovery || dev.Taints[0].Effect != "NoExecute" {
			t.Errorf("sharing %s: lost GPU taints %+v, want discovery NoExecute", sharing, dev.Taints)
		}
		if _, ok := dev.Capacity[publish.CapMemory]; ok {
			t.Errorf("sharing %s: lost GPU publishes a memory capacity %v", sharing, dev.Capacity)
		}
		if ts := devices(res)["gpu-0"].Taints; len(ts) != 0 {
			t.Errorf("the healthy GPU is tainted: %+v", ts)
		}
	}
}

func reasonsOf(r inventory.UnpublishedReason) []inventory.UnpublishedReason {
	if r == "" {
		return nil
	}
	return []inventory.UnpublishedReason{r}
}
