package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// SetReadiness installs the check /readyz runs; until then /readyz answers
// 503 "starting".
func (m *Metrics) SetReadiness(check func(context.Context) error) {
	if m == nil {
		return
	}
	m.ready.Store(&check)
}

// Handler serves /metrics from the registry, /healthz, which answers ok
// while the process serves HTTP at all (liveness), and /readyz, which
// answers ok only when the readiness check passes: for the agent,
// registered with the kubelet and every slice published. Nothing is
// guarded: GuardedHandler is what the agent serves.
func (m *Metrics) Handler() http.Handler { return m.GuardedHandler(nil) }

// GuardedHandler is Handler with /metrics behind guard (internal/metrics/auth:
// a token and the right to get /metrics); nil guards nothing. /healthz and
// /readyz stay open: the kubelet probes them without credentials, and they
// say no more than the pod's status does.
func (m *Metrics) GuardedHandler(guard func(http.Handler) http.Handler) http.Handler {
	mux := http.NewServeMux()
	var exposition http.Handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing collector should not hide the others.
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg, // promhttp_metric_handler_* on the same registry
	})
	if guard != nil {
		exposition = guard(exposition)
	}
	mux.Handle("/metrics", exposition)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		err := errors.New("starting")
		if check := m.ready.Load(); check != nil {
			err = (*check)(r.Context())
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// ProfilingHandler serves Go's /debug/pprof (the agent's --profiling, on a
// listener of its own on the loopback: pprof has no authentication, and a
// CPU profile costs the agent while it runs). The metrics handler never
// serves it.
func ProfilingHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// shutdownGrace bounds how long a scrape in flight may delay the agent's exit.
const shutdownGrace = 5 * time.Second

// Listen binds addr now, so that a port already in use fails the agent at
// start rather than leaving it running without metrics, and serves h on it
// over plain HTTP until ctx ends.
func Listen(ctx context.Context, addr string, h http.Handler) (net.Addr, error) {
	return ListenTLS(ctx, addr, h, nil)
}

// ListenTLS is Listen over HTTPS with cfg (nil: plain HTTP only). With
// cfg, plain HTTP is still answered on /healthz and /readyz, for the
// kubelet's probes, and on nothing else (listener.go has why).
func ListenTLS(ctx context.Context, addr string, h http.Handler, cfg *tls.Config) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	scheme := "http"
	if cfg != nil {
		l, h, scheme = newSniffListener(l, cfg), httpsOnly(h), "https"
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	logger := klog.FromContext(ctx)
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Metrics server stopped", "address", l.Addr().String())
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			logger.Error(err, "Shut down metrics server")
		}
	}()
	logger.Info("Serving metrics", "address", l.Addr().String(), "scheme", scheme, "paths", []string{"/metrics", "/healthz", "/readyz"})
	return l.Addr(), nil
}
