package amdsysfs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// cardHealth is what one GPU's polls remember.
type cardHealth struct {
	uuid, bdf string

	// seen: the PCI device directory was there at least once. A GPU whose
	// directory never was (a capture with only the KFD topology) is not
	// watched for presence or RAS.
	seen bool
	lost bool
	// resetting: the last read said the error query is inaccessible.
	resetting bool
	// blocks are the counts last read per RAS block; nil until the first
	// read (the baseline).
	blocks map[string]rasCount
	noRAS  bool // logged that the GPU has no RAS counters
	noDir  bool // logged that the GPU has no PCI device directory
	// failing is the last error logged per block ("" for the directory).
	failing map[string]string
}

// pollCard checks one GPU's presence and RAS counters.
func (w *rasWatch) pollCard(ctx context.Context, c *cardHealth) {
	r := w.b.root
	dev := path.Join(pciDevicesDir, c.bdf)
	if !r.exists(dev) {
		switch {
		case !c.seen:
			if !c.noDir {
				c.noDir = true
				w.logger.V(2).Info("GPU has no PCI device directory; presence and RAS not watched", "uuid", c.uuid, "pciBusID", c.bdf)
			}
		case !c.lost:
			c.lost = true
			w.send(ctx, backend.HealthEvent{UUID: c.uuid, Kind: backend.HealthLost,
				Message: fmt.Sprintf("PCI device %s is gone (%s): the GPU left the bus or was removed", c.bdf, r.path(dev))})
		}
		return
	}
	c.seen = true
	if c.lost {
		// Back on the bus: a new device to the driver, counting from zero.
		c.lost, c.resetting, c.blocks = false, false, nil
		w.send(ctx, backend.HealthEvent{UUID: c.uuid, Kind: backend.HealthRecovered, Message: fmt.Sprintf("PCI device %s is back", c.bdf)})
	}

	blocks, bad, err := readRAS(r, dev)
	switch {
	case errors.Is(err, errNoRAS):
		if !c.noRAS {
			c.noRAS = true
			w.logger.V(2).Info("GPU has no RAS error counters; not watched until they appear", "uuid", c.uuid, "pciBusID", c.bdf)
		}
		return
	case errors.Is(err, errRASInaccessible):
		if !c.resetting {
			c.resetting = true
			w.logger.V(2).Info("RAS error query inaccessible: GPU reset in progress", "uuid", c.uuid, "pciBusID", c.bdf)
		}
		return
	case err != nil:
		w.logFailure(c, "", err)
		return
	}
	c.noRAS = false
	delete(c.failing, "")
	for name, e := range bad {
		w.logFailure(c, name, e)
	}
	for name := range blocks {
		delete(c.failing, name)
	}
	w.compare(ctx, c, blocks)
}

// compare reports a reset and the sums that changed, and keeps blocks as
// the new last read. A block that could not be read this time (or whose
// file went away) keeps its last value, so a broken file is not mistaken
// for counters going back.
func (w *rasWatch) compare(ctx context.Context, c *cardHealth, blocks map[string]rasCount) {
	for name, old := range c.blocks {
		if _, ok := blocks[name]; !ok {
			blocks[name] = old
		}
	}
	var reset string
	if c.resetting {
		// The counters stay the driver's: what was counted before the
		// reset is not reported again.
		c.resetting = false
		reset = "RAS error counters readable again after a GPU reset"
	}
	if dropped := droppedBlocks(c.blocks, blocks); len(dropped) > 0 {
		c.blocks = nil // a new baseline
		if reset == "" {
			reset = fmt.Sprintf("RAS error counters went back (%s): the driver re-initialised the GPU", strings.Join(dropped, ", "))
		}
	}
	if reset != "" {
		w.send(ctx, backend.HealthEvent{UUID: c.uuid, Kind: backend.HealthRecovered, Message: reset})
	}
	old := c.blocks
	c.blocks = blocks
	for _, k := range []struct {
		kind backend.HealthKind
		name string
		get  func(rasCount) uint64
	}{
		{backend.HealthRASUncorrectable, "uncorrectable", func(x rasCount) uint64 { return x.UE }},
		{backend.HealthRASCorrectable, "correctable", func(x rasCount) uint64 { return x.CE }},
	} {
		now, was, changed := sum(blocks, k.get), sum(old, k.get), changes(old, blocks, k.get)
		if len(changed) == 0 {
			continue
		}
		msg := fmt.Sprintf("RAS %s errors: %d (%s)", k.name, now, strings.Join(changed, ", "))
		if old != nil {
			msg = fmt.Sprintf("RAS %s errors: %d, was %d (%s)", k.name, now, was, strings.Join(changed, ", "))
		}
		w.send(ctx, backend.HealthEvent{UUID: c.uuid, Kind: k.kind, Count: int64(min(now, 1<<63-1)), Message: msg})
	}
}

// droppedBlocks names the blocks whose counts went down since the last
// read ("umc ce 5->0").
func droppedBlocks(old, now map[string]rasCount) []string {
	var out []string
	for _, name := range blockNames(now) {
		o, ok := old[name]
		n := now[name]
		if !ok {
			continue
		}
		if n.UE < o.UE {
			out = append(out, fmt.Sprintf("%s ue %d->%d", name, o.UE, n.UE))
		}
		if n.CE < o.CE {
			out = append(out, fmt.Sprintf("%s ce %d->%d", name, o.CE, n.CE))
		}
	}
	return out
}

// changes names the blocks whose count changed since old ("gfx 0->2"); on
// the first read (old nil) the blocks that are not zero ("umc 3").
func changes(old, now map[string]rasCount, get func(rasCount) uint64) []string {
	var out []string
	for _, name := range blockNames(now) {
		n := get(now[name])
		if old == nil {
			if n != 0 {
				out = append(out, fmt.Sprintf("%s %d", name, n))
			}
			continue
		}
		if o := get(old[name]); o != n {
			out = append(out, fmt.Sprintf("%s %d->%d", name, o, n))
		}
	}
	return out
}

func sum(m map[string]rasCount, get func(rasCount) uint64) uint64 {
	var s uint64
	for _, c := range m {
		s += get(c)
	}
	return s
}

// logFailure logs a failed read once per distinct error and block.
func (w *rasWatch) logFailure(c *cardHealth, block string, err error) {
	if c.failing[block] == err.Error() {
		return
	}
	c.failing[block] = err.Error()
	w.logger.Error(err, "Reading RAS error counters failed; trying again every poll", "uuid", c.uuid, "pciBusID", c.bdf, "block", block)
}
