package claims

import (
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// BenchmarkMetadataOf is the agent's own part of a device's metadata: its
// published attributes copied and what prepare settled added, for a whole
// H100 (17 attributes) and for a capacity share.
func BenchmarkMetadataOf(b *testing.B) {
	_, res := alloctest.PublishSim(b, "dgx-h100", "node-1")
	e := res.Devices["gpu-3"]
	for _, tc := range []struct {
		name string
		dev  cdi.ClaimDevice
	}{
		{"whole GPU", cdi.ClaimDevice{Device: "gpu-3", GPU: *e.GPU}},
		{"capacity share", cdi.ClaimDevice{Device: "gpu-3", GPU: *e.GPU, Sharing: &sharing.Settings{Share: &sharing.Share{ID: "s", MemoryBytes: 7 << 30, ComputeUnits: 10, Enforced: true}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if m := metadataOf(e.Attributes, &tc.dev, nil); len(m) < len(e.Attributes) {
					b.Fatalf("%d attributes, want at least %d", len(m), len(e.Attributes))
				}
			}
		})
	}
}

// BenchmarkPassthrough is the manager's part of a passthrough's prepare and
// unprepare on the simulator: check (the GPU's IOMMU group read from the
// simulated sysfs), the intent saved, driver_override, unbind and bind
// written (the simulated kernel moving the driver links and the group's
// /dev/vfio node), the spec written, PrepareCompleted saved; then the
// intent, the spec removed, the GPU given back, the entry deleted. Beside
// it the same for a whole GPU not passed: what passthrough adds. The
// kubelet's socket, the claim GET and the node's republish are the driver
// benchmark's (BenchmarkPrepareUnprepareVFIO).
func BenchmarkPassthrough(b *testing.B) {
	// The tests read every checkpoint write back; the agent does not.
	defer func(v func(*checkpoint.Store, *checkpoint.Checkpoint)) { verifyWrite = v }(verifyWrite)
	verifyWrite = nil
	for _, pass := range []bool{false, true} {
		b.Run(map[bool]string{false: "whole GPU", true: "passthrough"}[pass], func(b *testing.B) {
			e := &env{t: b, dir: b.TempDir(), profile: "dgx-h100", bootID: "boot-1", passthrough: true}
			m, res := e.start(nil)
			// The node as published before the claim: the agent builds
			// it again after a passthrough, outside the prepare.
			m.cfg.Devices = func() *publish.Result { return res }
			ctx := ctxFor(b)
			claim := allocated("c", "gpu-3")
			if pass {
				claim = vfioClaim("c", "gpu-3")
			}
			var prep, unprep time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if _, err := m.Prepare(ctx, claim); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := m.Unprepare(ctx, "uid-c", "default", "c"); err != nil {
					b.Fatal(err)
				}
				prep, unprep = prep+mid.Sub(start), unprep+time.Since(mid)
			}
			b.ReportMetric(float64(prep.Microseconds())/float64(b.N), "prepare-us")
			b.ReportMetric(float64(unprep.Microseconds())/float64(b.N), "unprepare-us")
		})
	}
}
