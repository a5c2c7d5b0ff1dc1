package flagenv

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/version"
)

// Config is a command's configuration: its flags, and the check that fills
// defaults depending on several of them.
type Config interface {
	AddFlags(*pflag.FlagSet)
	Validate() error
}

// Run is every Tessera main after flags: it parses args into cfg (Parse),
// validates it and runs run with a logging context that ends on SIGINT or
// SIGTERM. -h prints usage and --version the version (to stdout), and both
// return nil without running.
func Run(name string, args []string, cfg Config, run func(context.Context) error) error {
	flush, help, err := parse(name, args, cfg.AddFlags, os.LookupEnv, os.Stdout)
	if err != nil || help {
		return err
	}
	defer flush()
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(klog.NewContext(ctx, klog.Background()))
}

// Parse is a Tessera command's flag and logging set-up, one for every main:
// the command's flags (add) and component-base's logging flags (-v,
// --logging-format), parsed from args, then TESSERA_<FLAG> for every flag
// not given, then logging applied. It returns the function that flushes
// the logs at exit; help is true when -h was asked (usage is printed and
// the command should exit 0) or --version (version.Flag; the version line
// is printed to stdout, and the command should exit 0).
func Parse(name string, args []string, add func(*pflag.FlagSet), lookup func(string) (string, bool)) (flush func(), help bool, err error) {
	return parse(name, args, add, lookup, os.Stdout)
}

func parse(name string, args []string, add func(*pflag.FlagSet), lookup func(string) (string, bool), stdout io.Writer) (flush func(), help bool, err error) {
	logCfg := logsapi.NewLoggingConfiguration()
	gate := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(gate); err != nil {
		return nil, false, err
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	add(fs)
	logsapi.AddFlags(logCfg, fs)
	ver := version.AddFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, true, nil
		}
		return nil, false, err
	}
	if ver.Requested() {
		version.Print(stdout, name, ver.Raw())
		return nil, true, nil
	}
	if err := Apply(fs, "TESSERA_", lookup); err != nil {
		return nil, false, err
	}
	if err := logsapi.ValidateAndApply(logCfg, gate); err != nil {
		return nil, false, err
	}
	return logs.FlushLogs, false, nil
}
