package claims

import (
	"testing"
)

// BenchmarkModePrepare is the agent's own cost of preparing and
// unpreparing an AMD compute partition on the simulator, mode changes
// done at once (a real one adds the driver's enumeration: 2 s modelled on
// mi300x-8, unmeasured on hardware): first, the first CPX partition on an
// idle GPU (the mode is set to CPX at prepare and back to SPX at
// unprepare); later, one more CPX partition on a GPU another claim holds
// in CPX (no mode change either way).
func BenchmarkModePrepare(b *testing.B) {
	for _, tc := range []struct {
		name   string
		holder bool
	}{{"first", false}, {"later", true}} {
		b.Run(tc.name, func(b *testing.B) {
			e := modeEnv(b)
			m, _ := e.start(nil)
			ctx := ctxFor(b)
			if tc.holder {
				if _, err := m.Prepare(ctx, allocated("holder", "gpu-0-xcp-cpx-0")); err != nil {
					b.Fatal(err)
				}
			}
			claim := allocated("x", "gpu-0-xcp-cpx-5")
			for b.Loop() {
				if _, err := m.Prepare(ctx, claim); err != nil {
					b.Fatal(err)
				}
				if err := m.Unprepare(ctx, "uid-x", "default", "x"); err != nil {
					b.Fatal(err)
				}
			}
			if tc.holder {
				if mode, _ := e.modeOf(m.cp.Claims["uid-holder"].Devices[0].GPUUUID); mode != "CPX" {
					b.Fatalf("holder's GPU in %s", mode)
				}
			}
		})
	}
}
