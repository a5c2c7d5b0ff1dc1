//go:build cgo && linux

package nvml

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// The polled counters. Each source is one NVML call giving one or more
// readings; a reading is reported when it differs from the last one read,
// and on the first read only when it is not zero (a count, or a pending
// flag as 1).

// reading is one value of one kind.
type reading struct {
	kind  backend.HealthKind
	value int64
}

// source is one NVML call and what it reads.
type source struct {
	call string
	read func(nvml.Device) ([]reading, nvml.Return)
}

var (
	sourceSBE = source{
		call: "nvmlDeviceGetTotalEccErrors(corrected, volatile)",
		read: eccTotal(nvml.MEMORY_ERROR_TYPE_CORRECTED, backend.HealthECCSingleBit),
	}
	sourceDBE = source{
		call: "nvmlDeviceGetTotalEccErrors(uncorrected, volatile)",
		read: eccTotal(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, backend.HealthECCDoubleBit),
	}
	// Row remapping: Ampere and later.
	sourceRemap = source{
		call: "nvmlDeviceGetRemappedRows",
		read: func(h nvml.Device) ([]reading, nvml.Return) {
			_, _, pending, failed, ret := h.GetRemappedRows()
			return []reading{
				{backend.HealthRowRemapPending, flag(pending)},
				{backend.HealthRowRemapFailed, flag(failed)},
			}, ret
		},
	}
	// Dynamic page retirement: before Ampere (NOT_SUPPORTED after).
	sourcePages = source{
		call: "nvmlDeviceGetRetiredPagesPendingStatus",
		read: func(h nvml.Device) ([]reading, nvml.Return) {
			s, ret := h.GetRetiredPagesPendingStatus()
			return []reading{{backend.HealthRetiredPagesPending, flag(s == nvml.FEATURE_ENABLED)}}, ret
		},
	}
	counterSources = []source{sourceSBE, sourceDBE, sourceRemap, sourcePages}
)

func eccTotal(t nvml.MemoryErrorType, kind backend.HealthKind) func(nvml.Device) ([]reading, nvml.Return) {
	return func(h nvml.Device) ([]reading, nvml.Return) {
		n, ret := h.GetTotalEccErrors(t, nvml.VOLATILE_ECC)
		return []reading{{kind, int64(min(n, 1<<63-1))}}, ret
	}
}

func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// readSource reads one source of one GPU and reports what changed. A
// source the GPU does not support is skipped from then on; a lost GPU is
// reported lost.
func (w *healthWatch) readSource(ctx context.Context, g *gpuHealth, s source) {
	if g.unsupported[s.call] {
		return
	}
	rs, ret := s.read(g.h)
	if err := check(s.call, ret); err != nil {
		switch {
		case is(err, nvml.ERROR_GPU_IS_LOST):
			w.lose(ctx, g, err)
		case notSupported(err):
			g.unsupported[s.call] = true
			w.logger.V(2).Info("GPU does not support a health counter; not read again", "uuid", g.uuid, "err", err)
		default:
			w.logFailure(g, s.call, err)
		}
		return
	}
	delete(g.failing, s.call)
	for _, r := range rs {
		last, known := g.last[r.kind]
		g.last[r.kind] = r.value
		if known && last == r.value || !known && r.value == 0 {
			continue
		}
		w.send(ctx, backend.HealthEvent{UUID: g.uuid, Kind: r.kind, Count: r.value, Message: counterMessage(r, last, known)})
	}
}

// counterMessage says what a reading means, for logs and the pod status.
func counterMessage(r reading, last int64, known bool) string {
	was := "first read"
	if known {
		was = fmt.Sprintf("was %d", last)
	}
	switch r.kind {
	case backend.HealthECCSingleBit:
		return fmt.Sprintf("volatile corrected (single-bit) ECC errors: %d (%s)", r.value, was)
	case backend.HealthECCDoubleBit:
		return fmt.Sprintf("volatile uncorrected (double-bit) ECC errors: %d (%s)", r.value, was)
	case backend.HealthRowRemapPending:
		if r.value != 0 {
			return "remapped rows are pending: they take effect at the next GPU reset"
		}
		return "no row remapping pending any more"
	case backend.HealthRowRemapFailed:
		if r.value != 0 {
			return "a row remapping failed: the GPU memory cannot be repaired"
		}
		return "no row remapping failure any more"
	case backend.HealthRetiredPagesPending:
		if r.value != 0 {
			return "retired pages are pending: they take effect at the next GPU reset"
		}
		return "no page retirement pending any more"
	}
	return fmt.Sprintf("%s: %d (%s)", r.kind, r.value, was)
}
