// Package flagenv sets command-line flags from environment variables, so that
// a Helm chart can configure a Tessera command through its pod's env (which
// `kubectl describe` shows) while a flag given on the command line still wins.
package flagenv

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tessera-gpu/tessera/internal/version"
)

// Name is the variable of flag: prefix, then the flag's name in upper case
// with dashes as underscores (TESSERA_ and tls-cert-file: TESSERA_TLS_CERT_FILE).
func Name(prefix, flag string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Apply sets every flag of fs not given on the command line from its
// variable, when lookup finds one. All bad values are reported together.
// --version is never set from the environment: a pod's TESSERA_VERSION (a
// chart value, say) must not turn the program into one that prints its
// version and exits.
func Apply(fs *pflag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == version.FlagName {
			return
		}
		env := Name(prefix, f.Name)
		if v, ok := lookup(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", env, v, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("environment: %s", strings.Join(errs, "; "))
	}
	return nil
}
