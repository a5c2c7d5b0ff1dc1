package webhook

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// CertReloader serves a key pair from two files and re-reads them when
// either changes. A Secret volume is updated in place on rotation (the
// kubelet swaps a symlink to a new directory), so a rotated certificate is
// served from the next TLS handshake on, without a restart.
type CertReloader struct {
	logger            klog.Logger
	certFile, keyFile string

	mu     sync.Mutex
	cert   *tls.Certificate
	loaded stamps // of the files cert was read from
	failed stamps // of files that did not load; not retried until they change
	err    error  // why failed did not load
}

// stamps identify a version of the two files; os.Stat follows the
// Secret volume's symlinks to the current files.
type stamps struct {
	cert, key fileStamp
}

type fileStamp struct {
	modNanos, size int64
}

// NewCertReloader loads the pair now, so a missing or bad certificate fails
// the process at start.
func NewCertReloader(logger klog.Logger, certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{logger: logger, certFile: certFile, keyFile: keyFile}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.reloadIfChanged(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate is for tls.Config.GetCertificate: the current pair,
// re-read first if the files changed. While the files do not load (a
// rotation half done: new certificate, old key) the last good pair is
// served.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.reloadIfChanged() // logged; the previous pair stays
	return r.cert, nil
}

// Ready reports whether a valid certificate is served: re-read if the files
// changed (so a readiness probe picks up a rotation without traffic) and
// not expired.
func (r *CertReloader) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.reloadIfChanged()
	if leaf := r.cert.Leaf; leaf != nil && time.Now().After(leaf.NotAfter) {
		return fmt.Errorf("serving certificate %s expired at %s", r.certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// reloadIfChanged re-reads the pair when the files differ from those last
// loaded and last failed. Callers hold r.mu.
func (r *CertReloader) reloadIfChanged() error {
	// Stat before reading: if a file changes in between, the next call sees
	// a newer stamp than the one recorded and reads again.
	now, err := r.stat()
	if err != nil {
		if r.cert == nil {
			return err
		}
		if r.err == nil || r.err.Error() != err.Error() {
			r.logger.Error(err, "Cannot stat the serving certificate; serving the previous one")
		}
		r.err = err
		return err
	}
	switch now {
	case r.loaded:
		r.failed, r.err = stamps{}, nil
		return nil
	case r.failed:
		return r.err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		err = fmt.Errorf("load serving certificate %s and key %s: %w", r.certFile, r.keyFile, err)
		r.failed, r.err = now, err
		if r.cert != nil {
			r.logger.Error(err, "Serving the previous certificate until the files load")
		}
		return err
	}
	if r.cert != nil {
		r.logger.Info("Reloaded the serving certificate", "certFile", r.certFile, "notAfter", cert.Leaf.NotAfter)
	}
	r.cert, r.loaded, r.failed, r.err = &cert, now, stamps{}, nil
	return nil
}

func (r *CertReloader) stat() (stamps, error) {
	c, err := os.Stat(r.certFile)
	if err != nil {
		return stamps{}, fmt.Errorf("serving certificate: %w", err)
	}
	k, err := os.Stat(r.keyFile)
	if err != nil {
		return stamps{}, fmt.Errorf("serving key: %w", err)
	}
	return stamps{
		cert: fileStamp{c.ModTime().UnixNano(), c.Size()},
		key:  fileStamp{k.ModTime().UnixNano(), k.Size()},
	}, nil
}
