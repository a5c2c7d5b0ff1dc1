package metrics

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// With TLS the metrics port speaks both HTTPS and plain HTTP, told apart by
// a connection's first byte (a TLS record starts with 0x16, an HTTP
// request with a letter), and plain HTTP is answered only on the probes'
// paths. The kubelet's probes therefore stay plain HTTP on the same port,
// whichever way /metrics is served: on the host network, during a
// surgeUpgrades handover, the new pod's probes reach the old agent still
// holding the port (docs/operating.md), and an old agent that speaks only
// HTTP and a new one that speaks HTTPS both answer them. A probe scheme
// that changed with the version would keep the new pod unready forever
// behind the old agent, and the upgrade with it.

// plainPaths are what plain HTTP is answered on beside HTTPS.
var plainPaths = []string{"/healthz", "/readyz"}

// peekTimeout bounds how long a connection may take to send its first
// byte, as http.Server's ReadHeaderTimeout bounds its headers.
const peekTimeout = 10 * time.Second

// tlsRecordHandshake is the first byte of a TLS ClientHello.
const tlsRecordHandshake = 0x16

// sniffListener hands http.Server a *tls.Conn for a connection that opens
// with a TLS handshake and the plain connection otherwise. Each new
// connection's first byte is read off the accepting goroutine, so a client
// that sends nothing holds up no one else.
type sniffListener struct {
	net.Listener
	config *tls.Config
	conns  chan net.Conn
	errs   chan error
	done   chan struct{}
	once   sync.Once
}

func newSniffListener(l net.Listener, config *tls.Config) *sniffListener {
	s := &sniffListener{Listener: l, config: config, conns: make(chan net.Conn), errs: make(chan error), done: make(chan struct{})}
	go s.accept()
	return s
}

func (s *sniffListener) accept() {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			// http.Server retries the errors it deems temporary
			// (too many open files) and returns on the others.
			select {
			case s.errs <- err:
			case <-s.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go s.classify(c)
	}
}

func (s *sniffListener) classify(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	r := bufio.NewReader(c)
	first, err := r.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	var out net.Conn = &peekedConn{Conn: c, r: r}
	if first[0] == tlsRecordHandshake {
		out = tls.Server(out, s.config)
	}
	select {
	case s.conns <- out:
	case <-s.done:
		out.Close()
	}
}

func (s *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case err := <-s.errs:
		return nil, err
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *sniffListener) Close() error {
	s.once.Do(func() { close(s.done) })
	return s.Listener.Close()
}

// peekedConn reads what was peeked before the rest of the connection.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// httpsOnly answers a plain HTTP request on any path but plainPaths with
// 400, before h sees it: /metrics and whatever token came with it are for
// HTTPS only.
func httpsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil && !slices.Contains(plainPaths, r.URL.Path) {
			http.Error(w, "Bad Request: this port serves "+r.URL.Path+" over HTTPS only", http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
