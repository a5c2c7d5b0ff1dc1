//go:build !cgo || !linux

package nvml

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

// errNoCgo is what every entry point says in a build without cgo: go-nvml
// loads libnvidia-ml through cgo, so there is nothing to call.
var errNoCgo = errors.New("the nvml backend needs a cgo build (CGO_ENABLED=1) on linux")

// Options mirrors the cgo build's Options, less the library handle (whose
// type only exists with cgo), so callers compile the same in both builds.
type Options struct {
	LibraryPath    string
	SysfsRoot      string
	Logger         klog.Logger
	NvidiaSMI      string
	MPSControl     []string
	MPSLibraryPath string
	MPSRoot        string
	// MPSLauncher: as in the cgo build.
	MPSLauncher mps.Launcher

	HealthPollInterval time.Duration
}

// Backend is a placeholder in builds without cgo; New never returns one.
type Backend struct{}

var (
	_ backend.Backend         = (*Backend)(nil)
	_ backend.StrayCleaner    = (*Backend)(nil)
	_ backend.TelemetryReader = (*Backend)(nil)
)

// New fails: this build has no NVML.
func New(Options) (*Backend, error) { return nil, errNoCgo }

// Detect reports that NVML cannot be used by this build.
func Detect(string) (ok bool, reason string) { return false, errNoCgo.Error() }

func (*Backend) Name() string                                       { return "nvml" }
func (*Backend) Close() error                                       { return nil }
func (*Backend) DevRoot() string                                    { return "/dev" }
func (*Backend) DeviceNumbers(string) (major, minor int64, ok bool) { return 0, 0, false }
func (*Backend) Discover(context.Context) (*inventory.Node, error)  { return nil, errNoCgo }
func (*Backend) CreatePartition(context.Context, string, string, inventory.Placement) (*inventory.Partition, error) {
	return nil, errNoCgo
}
func (*Backend) DestroyPartition(context.Context, string, string) error { return errNoCgo }
func (*Backend) SetPartitionMode(context.Context, string, bool) error   { return errNoCgo }
func (*Backend) DestroyStray(context.Context, string) (int, error)      { return 0, errNoCgo }
func (*Backend) WatchHealth(context.Context, chan<- backend.HealthEvent) error {
	return errNoCgo
}
func (*Backend) SetTimeSlice(context.Context, string, backend.TimeSlice) error { return errNoCgo }
func (*Backend) StartMPS(context.Context, mps.DaemonSpec) (*mps.Daemon, error) {
	return nil, errNoCgo
}
func (*Backend) StopMPS(context.Context, string) error { return errNoCgo }
func (*Backend) EnsureMPSNamespace(context.Context, string, mps.NamespaceSpec) (string, error) {
	return "", errNoCgo
}
func (*Backend) DeleteMPSNamespace(context.Context, string, string) error { return errNoCgo }
func (*Backend) MPSDaemons(context.Context) ([]mps.DaemonState, error) {
	return nil, errNoCgo
}
func (*Backend) ReadTelemetry(context.Context) ([]telemetry.Sample, error) { return nil, errNoCgo }
