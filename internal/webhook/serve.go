package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// shutdownGrace bounds how long reviews in flight may delay the exit; the
// API server's own timeout for a call (the chart's timeoutSeconds) is less.
const shutdownGrace = 10 * time.Second

// Server is a started webhook server.
type Server struct {
	addr     net.Addr
	served   chan error    // Serve's result
	shutdown chan struct{} // closed when Shutdown has returned
}

// Start loads the serving certificate, binds c.BindAddress, writes the
// bound port to c.PortFile (when set) and serves until ctx ends. Binding
// before anything learns the port is what makes port 0 race-free: the
// kernel hands this process a free port and it keeps it.
func Start(ctx context.Context, c *Config) (*Server, error) {
	logger := klog.FromContext(ctx)
	certs, err := NewCertReloader(logger, c.CertFile, c.KeyFile)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", c.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("--bind-address: %w", err)
	}
	if c.PortFile != "" {
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		if err := fsutil.WriteFileAtomic(c.PortFile, []byte(port+"\n"), 0o644); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("--port-file: %w", err)
		}
	}
	srv := &http.Server{
		Handler: NewHandler(logger, certs.Ready),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	s := &Server{addr: l.Addr(), served: make(chan error, 1), shutdown: make(chan struct{})}
	go func() {
		// The certificate comes from TLSConfig.GetCertificate.
		s.served <- srv.ServeTLS(l, "", "")
	}()
	go func() {
		defer close(s.shutdown)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			logger.Error(err, "Shut down the webhook server")
		}
	}()
	logger.Info("Serving admission reviews", "address", l.Addr().String(), "paths", []string{"/validate", "/readyz", "/healthz"})
	return s, nil
}

// Addr is the bound address (with the port the kernel chose for port 0).
func (s *Server) Addr() net.Addr { return s.addr }

// Wait returns when the server has stopped: nil after its context ended and
// the reviews in flight were answered, the error if serving failed.
func (s *Server) Wait() error {
	err := <-s.served
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	<-s.shutdown
	return nil
}

// Run serves until ctx ends.
func Run(ctx context.Context, c *Config) error {
	s, err := Start(ctx, c)
	if err != nil {
		return err
	}
	return s.Wait()
}
