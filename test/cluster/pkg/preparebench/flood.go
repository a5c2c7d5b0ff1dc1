package preparebench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// flood keeps n readiness requests to url in flight until stopped, at
// most perSecond a second when that is positive: what any pod that reaches
// the agent's unauthenticated metrics port can do.
type flood struct {
	url       string
	n         int
	perSecond int

	answered, failed atomic.Int64
	cancel           context.CancelFunc
	wg               sync.WaitGroup
	started          time.Time
	took             time.Duration
}

func (f *flood) start(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	// One connection per requester, kept alive, as a flooding client
	// would; the agent's server sees n concurrent streams of requests.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.n}, Timeout: 5 * time.Second}
	f.started = time.Now()
	var tick <-chan time.Time
	if f.perSecond > 0 {
		t := time.NewTicker(time.Second / time.Duration(f.perSecond))
		tick = t.C
		context.AfterFunc(ctx, t.Stop)
	}
	for range f.n {
		f.wg.Go(func() {
			for ctx.Err() == nil {
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
						return
					}
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						f.failed.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				f.answered.Add(1)
			}
		})
	}
}

func (f *flood) stop() {
	f.cancel()
	f.wg.Wait()
	f.took += time.Since(f.started)
}

// rate is the answered requests per second over the flood's time.
func (f *flood) rate() float64 {
	if f.took <= 0 {
		return 0
	}
	return float64(f.answered.Load()) / f.took.Seconds()
}

// freeAddress is a loopback address with a port free now, for an agent's
// metrics server.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
