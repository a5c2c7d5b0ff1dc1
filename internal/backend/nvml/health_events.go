//go:build cgo && linux

package nvml

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// The NVML event set: which events are asked for, how the set is (re)built
// and what a wait result becomes.

// watchedEvents are the event types WatchHealth registers, where supported.
const watchedEvents = uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError)

// noInstance is NVML's "not attributable to a GPU or compute instance" in
// an event's GpuInstanceId and ComputeInstanceId.
const noInstance = 0xFFFFFFFF

// registered counts the GPUs registered in the current event set.
func (w *healthWatch) registered() int {
	n := 0
	for _, g := range w.gpus {
		if g.registered {
			n++
		}
	}
	return n
}

// freeSet frees the event set, if any.
func (w *healthWatch) freeSet() {
	if w.set == nil {
		return
	}
	if err := check("nvmlEventSetFree", w.set.Free()); err != nil {
		w.logger.Error(err, "Freeing the NVML event set")
	}
	w.set = nil
	for _, g := range w.gpus {
		g.registered = false
	}
}

// rebuildSet replaces the event set with one holding every GPU that is not
// lost. NVML cannot take a GPU out of a set, and a set holding a lost GPU
// may fail every wait, so a loss or a return rebuilds it. Events that
// arrived in the old set and were not yet read are dropped; the counters
// the next poll reads still show them.
func (w *healthWatch) rebuildSet(ctx context.Context) {
	w.freeSet()
	w.setStale = false
	set, ret := w.b.lib.EventSetCreate()
	if err := check("nvmlEventSetCreate", ret); err != nil {
		// Polling still works; try again at the next poll.
		w.setStale = true
		if err.Error() != w.setErr {
			w.setErr = err.Error()
			w.logger.Error(err, "No NVML event set: XID and ECC events are not watched, counters still are")
		}
		return
	}
	w.setErr = ""
	w.set = set
	for _, g := range w.gpus {
		if !g.lost {
			w.register(ctx, g)
		}
	}
}

// register adds one GPU to the set with the watched event types it
// supports. A GPU that refuses is logged (once per distinct reason) and
// still polled.
func (w *healthWatch) register(ctx context.Context, g *gpuHealth) {
	supported, ret := g.h.GetSupportedEventTypes()
	err := check("nvmlDeviceGetSupportedEventTypes", ret)
	if err == nil {
		if supported&watchedEvents == 0 {
			err = fmt.Errorf("none of XID and ECC events supported (mask 0x%x)", supported)
		} else {
			err = check("nvmlDeviceRegisterEvents", g.h.RegisterEvents(supported&watchedEvents, w.set))
		}
	}
	if err == nil {
		g.registered = true
		g.registerErr = ""
		return
	}
	if is(err, nvml.ERROR_GPU_IS_LOST) {
		// The set is rebuilt without it at the next poll.
		w.lose(ctx, g, err)
		return
	}
	if err.Error() == g.registerErr {
		return
	}
	g.registerErr = err.Error()
	if notSupported(err) {
		w.logger.V(2).Info("GPU has no XID/ECC events; its counters are polled", "uuid", g.uuid, "err", err)
		return
	}
	w.logger.Error(err, "GPU refused event registration; its counters are polled", "uuid", g.uuid)
}

// onWait handles one nvmlEventSetWait result.
func (w *healthWatch) onWait(ctx context.Context, data nvml.EventData, ret nvml.Return) {
	switch ret {
	case nvml.SUCCESS:
		w.onEvent(ctx, data)
		return
	case nvml.ERROR_TIMEOUT:
		return
	}
	err := check("nvmlEventSetWait", ret)
	if ret == nvml.ERROR_GPU_IS_LOST {
		// Name the GPU if the data does; otherwise find it by probing. A
		// GPU already lost is out of the set: the data is not to be trusted.
		if g := w.gpuOf(data.Device); g != nil && !g.lost {
			w.lose(ctx, g, err)
			w.rebuildSet(ctx)
			return
		}
		if w.probeAll(ctx) > 0 {
			w.rebuildSet(ctx)
			return
		}
	}
	// No GPU explains it: wait for the next poll instead of spinning on a
	// set that fails, and rebuild the set then.
	if err.Error() != w.setErr {
		w.setErr = err.Error()
		w.logger.Error(err, "Waiting for NVML events failed; trying again at the next poll")
	}
	w.waitOff = true
	w.setStale = true
}

// onEvent turns one NVML event into health events.
func (w *healthWatch) onEvent(ctx context.Context, data nvml.EventData) {
	g := w.gpuOf(data.Device)
	if g == nil {
		w.logger.Info("NVML event for a GPU this agent does not watch; dropped", "type", data.EventType, "data", data.EventData)
		return
	}
	if g.lost {
		return
	}
	switch {
	case data.EventType&nvml.EventTypeXidCriticalError != 0:
		w.onXID(ctx, g, data)
	case data.EventType&nvml.EventTypeSingleBitEccError != 0:
		w.readSource(ctx, g, sourceSBE)
	case data.EventType&nvml.EventTypeDoubleBitEccError != 0:
		w.readSource(ctx, g, sourceDBE)
	default:
		w.logger.V(4).Info("NVML event of a type not watched; dropped", "uuid", g.uuid, "type", data.EventType)
	}
}

// onXID reports an XID on the MIG devices of the GPU instance the event
// names, or on the whole GPU when it names none (or none matches).
func (w *healthWatch) onXID(ctx context.Context, g *gpuHealth, data nvml.EventData) {
	code := int64(data.EventData)
	msg := fmt.Sprintf("XID %d", code)
	uuids := []string{g.uuid}
	if data.GpuInstanceId != noInstance {
		if mig := w.migUUIDs(g, data.GpuInstanceId, data.ComputeInstanceId); len(mig) > 0 {
			uuids = mig
			msg = fmt.Sprintf("XID %d on GPU instance %d", code, data.GpuInstanceId)
			if data.ComputeInstanceId != noInstance {
				msg += fmt.Sprintf(", compute instance %d", data.ComputeInstanceId)
			}
		}
	}
	for _, u := range uuids {
		w.send(ctx, backend.HealthEvent{UUID: u, Kind: backend.HealthXID, Code: code, Message: msg})
	}
}

// migUUIDs returns the UUIDs of the GPU's MIG devices in GPU instance gi
// (and compute instance ci, unless noInstance). A GPU without MIG, or a
// walk that fails, gives none: the event then goes to the whole GPU.
func (w *healthWatch) migUUIDs(g *gpuHealth, gi, ci uint32) []string {
	var out []string
	err := eachMIGDevice(g.h, func(i int, d nvml.Device) error {
		dgi, ret := d.GetGpuInstanceId()
		if err := check("nvmlDeviceGetGpuInstanceId", ret); err != nil {
			return fmt.Errorf("MIG device %d: %w", i, err)
		}
		dci, ret := d.GetComputeInstanceId()
		if err := check("nvmlDeviceGetComputeInstanceId", ret); err != nil {
			return fmt.Errorf("MIG device %d: %w", i, err)
		}
		if uint32(dgi) != gi || (ci != noInstance && uint32(dci) != ci) {
			return nil
		}
		u, ret := d.GetUUID()
		if err := check("nvmlDeviceGetUUID(MIG)", ret); err != nil {
			return fmt.Errorf("MIG device %d: %w", i, err)
		}
		out = append(out, u)
		return nil
	})
	if err != nil {
		if !notSupported(err) {
			w.logger.V(2).Info("XID names a GPU instance but its MIG devices could not be read; reported on the GPU", "uuid", g.uuid, "gpuInstance", gi, "err", err)
		}
		return nil
	}
	return out
}

// gpuOf finds the watched GPU of an event's device handle: by handle
// (NVML hands out one handle per GPU), else by UUID.
func (w *healthWatch) gpuOf(d nvml.Device) *gpuHealth {
	if d == nil {
		return nil
	}
	for _, g := range w.gpus {
		if g.h == d {
			return g
		}
	}
	u, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		return nil
	}
	for _, g := range w.gpus {
		if g.uuid == u {
			return g
		}
	}
	return nil
}
