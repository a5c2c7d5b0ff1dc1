//go:build cgo && linux

package nvml

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// One GPU's health state: lost or answering, and what its counters read
// last. A lost GPU is reported once, then only probed (one cheap call per
// poll) until it answers again, which is reported as HealthRecovered and
// starts a new baseline.

// probeCall is the first call of every poll, so a GPU with no counters at
// all is still seen lost, and the one call a lost GPU is asked until it
// answers. It is supported on every NVIDIA GPU and reads live state (used
// memory), not a cache. Any answer but ERROR_GPU_IS_LOST counts as the GPU
// answering: in MIG mode an unprivileged caller gets NO_PERMISSION for the
// whole GPU, and that is still the driver reaching it.
const probeCall = "nvmlDeviceGetMemoryInfo"

type gpuHealth struct {
	index int
	uuid  string // as Discover publishes it
	h     nvml.Device

	lost        bool
	registered  bool   // in the current event set
	registerErr string // last registration failure logged

	// last holds the last value read per counting kind; a kind is absent
	// until its first read (the baseline).
	last map[backend.HealthKind]int64
	// unsupported holds the sources (by call) the GPU answered
	// NOT_SUPPORTED; they are not read again.
	unsupported map[string]bool
	// failing holds the last error logged per source, so a source that
	// keeps failing the same way is logged once.
	failing map[string]string
}

func newGPUHealth(index int, uuid string, h nvml.Device) *gpuHealth {
	return &gpuHealth{
		index: index, uuid: uuid, h: h,
		last:        map[backend.HealthKind]int64{},
		unsupported: map[string]bool{},
		failing:     map[string]string{},
	}
}

// pollGPU probes one GPU and, if it answers, reads its counters. A lost
// GPU that answers the probe is back.
func (w *healthWatch) pollGPU(ctx context.Context, g *gpuHealth) {
	err := w.probe(g)
	lost := is(err, nvml.ERROR_GPU_IS_LOST)
	switch {
	case g.lost && lost:
		return
	case g.lost:
		w.recover(ctx, g)
	case lost:
		w.lose(ctx, g, err)
		return
	}
	switch {
	case err == nil:
		delete(g.failing, probeCall)
	case g.failing[probeCall] != err.Error():
		// Not a loss, and the counters may still answer.
		g.failing[probeCall] = err.Error()
		w.logger.V(2).Info("GPU probe failed; only ERROR_GPU_IS_LOST counts as lost", "uuid", g.uuid, "err", err)
	}
	for _, s := range counterSources {
		if g.lost {
			return
		}
		w.readSource(ctx, g, s)
	}
}

// probe makes the one cheap call.
func (w *healthWatch) probe(g *gpuHealth) error {
	_, ret := g.h.GetMemoryInfo()
	return check(probeCall, ret)
}

// probeAll probes every GPU not lost yet, after an event wait reported a
// lost GPU without naming it; it returns how many it found lost.
func (w *healthWatch) probeAll(ctx context.Context) int {
	n := 0
	for _, g := range w.gpus {
		if g.lost {
			continue
		}
		if err := w.probe(g); is(err, nvml.ERROR_GPU_IS_LOST) {
			w.lose(ctx, g, err)
			n++
		}
	}
	return n
}

// lose reports a GPU lost, once; err names the call that said so.
func (w *healthWatch) lose(ctx context.Context, g *gpuHealth, err error) {
	if g.lost {
		return
	}
	g.lost = true
	w.setStale = true // the set is rebuilt without it
	w.logger.Info("GPU lost; probing it every poll until it answers", "uuid", g.uuid, "index", g.index, "err", err)
	w.send(ctx, backend.HealthEvent{UUID: g.uuid, Kind: backend.HealthLost, Message: fmt.Sprintf("GPU is lost: %v", err)})
}

// recover reports a lost GPU answering again; its counters start over.
func (w *healthWatch) recover(ctx context.Context, g *gpuHealth) {
	g.lost = false
	clear(g.last)
	clear(g.failing)
	w.setStale = true // the set is rebuilt with it
	w.logger.Info("GPU answers again", "uuid", g.uuid, "index", g.index)
	w.send(ctx, backend.HealthEvent{UUID: g.uuid, Kind: backend.HealthRecovered, Message: "GPU answers again (" + probeCall + ")"})
}

// logFailure logs a failed read once per distinct error and source.
func (w *healthWatch) logFailure(g *gpuHealth, call string, err error) {
	if g.failing[call] == err.Error() {
		return
	}
	g.failing[call] = err.Error()
	w.logger.Error(err, "Reading GPU health failed; trying again every poll", "uuid", g.uuid)
}
