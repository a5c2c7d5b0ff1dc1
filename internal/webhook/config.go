package webhook

import (
	"errors"

	"github.com/spf13/pflag"
)

// Config holds the webhook's flags.
type Config struct {
	CertFile    string
	KeyFile     string
	BindAddress string
	PortFile    string
}

// DefaultBindAddress: 9443 rather than 443, so the process needs no
// privilege to bind it; the chart's Service maps 443 to it.
const DefaultBindAddress = ":9443"

// AddFlags registers the webhook's flags on fs.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.CertFile, "tls-cert-file", "", "PEM serving certificate (chain). Re-read when it changes, so a rotated Secret needs no restart. Required.")
	fs.StringVar(&c.KeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file. Required.")
	fs.StringVar(&c.BindAddress, "bind-address", DefaultBindAddress, "host:port to serve HTTPS on (POST /validate, GET /readyz, GET /healthz). Port 0: any free port, see --port-file.")
	fs.StringVar(&c.PortFile, "port-file", "", "File to write the bound port to (atomically) once listening, for callers that bind port 0 and must learn which port it got.")
}

// Validate checks the flags.
func (c *Config) Validate() error {
	var errs []error
	if c.CertFile == "" {
		errs = append(errs, errors.New("--tls-cert-file is required"))
	}
	if c.KeyFile == "" {
		errs = append(errs, errors.New("--tls-private-key-file is required"))
	}
	if c.BindAddress == "" {
		errs = append(errs, errors.New("--bind-address is required"))
	}
	return errors.Join(errs...)
}
