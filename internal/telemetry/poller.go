package telemetry

import (
	"context"
	"time"

	"github.com/tessera-gpu/tessera/internal/poll"
)

// DefaultInterval is the agent's --telemetry-poll default: the same as a
// typical Prometheus scrape interval, so each scrape sees a fresh poll
// without polling the hardware more often than anyone looks.
const DefaultInterval = 10 * time.Second

// Poller keeps the latest readings of every device.
type Poller = poll.Last[[]Sample]

// NewPoller polls read (a backend's backend.TelemetryReader.ReadTelemetry)
// every interval (DefaultInterval when not positive); failed, if set,
// counts each failed poll.
func NewPoller(read func(context.Context) ([]Sample, error), interval time.Duration, failed func()) *Poller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Poller{What: "device telemetry", Read: read, Interval: interval, Failed: failed}
}
