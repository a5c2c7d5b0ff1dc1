// Package preparebench measures a DRA kubelet plugin's prepare and
// unprepare the way the kubelet drives them: the plugin runs as its own
// process against a real API server, claims exist there with their
// allocation, and the harness calls NodePrepareResources and
// NodeUnprepareResources over the plugin's gRPC socket, one claim per
// call. The same harness runs Tessera and a reference driver (the
// kubernetes-sigs/dra-example-driver kubelet plugin), so the two can be
// compared in one run (`make bench-prepare`).
package preparebench

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
)

// A Driver is a kubelet plugin to measure.
type Driver struct {
	// Label names it in results.
	Label string
	// DriverName is the DRA driver name its slices and allocations carry.
	DriverName string
	// Args returns its command line for a node, kubeconfig, state
	// directory (disk, like /var/lib/kubelet) and runtime directory (tmpfs
	// where the machine has one, like /var/run, where CDI specs go) of its
	// own, and the path of its DRA gRPC socket.
	Args func(node, kubeconfig, dir, runDir string) (argv []string, socket string)
	// ReadyzFlood, when positive, is how many /readyz requests are kept in
	// flight against the plugin while it is measured, at most
	// ReadyzPerSecond a second when that is positive; ReadyzURL is where.
	ReadyzFlood, ReadyzPerSecond int
	ReadyzURL                    string
	// ContentType is what its API client asks the API server for, so the
	// harness's GET of each claim costs what the plugin's helper's GET of
	// it costs; empty is client-go's default, JSON.
	ContentType string
}

// Tessera is the agent on a simulated DGX H100 (static partitioning: eight
// whole GPUs), with its metrics server off; extra flags follow.
func Tessera(binary string, extra ...string) Driver {
	return Driver{
		Label:      "tessera",
		DriverName: "gpu.tessera.dev",
		Args: func(node, kubeconfig, dir, runDir string) ([]string, string) {
			argv := []string{binary,
				"--backend=sim", "--sim-profile=dgx-h100", "--sim-state-dir=" + filepath.Join(dir, "sim"),
				"--node-name=" + node, "--kubeconfig=" + kubeconfig,
				"--plugin-data-dir=" + filepath.Join(dir, "plugin"), "--registrar-dir=" + filepath.Join(dir, "registry"),
				"--cdi-dir=" + filepath.Join(runDir, "cdi"), "--metrics-address=",
			}
			return append(argv, extra...), filepath.Join(dir, "plugin", "dra.sock")
		},
		// The agent reads the API server in protobuf (internal/agent).
		ContentType: runtime.ContentTypeProtobuf,
	}
}

// TesseraFlooded is Tessera with its metrics server on a free loopback
// port, where flood readiness requests are kept in flight (at most
// perSecond a second, when positive) while it is measured: the same run
// then tells what a flood costs prepares.
func TesseraFlooded(binary string, flood, perSecond int, extra ...string) (Driver, error) {
	addr, err := freeAddress()
	if err != nil {
		return Driver{}, err
	}
	d := Tessera(binary, append([]string{"--metrics-address=" + addr}, extra...)...)
	d.Label = "tessera-readyz-flood" // in claim and directory names
	d.ReadyzFlood, d.ReadyzPerSecond, d.ReadyzURL = flood, perSecond, "http://"+addr+"/readyz"
	return d, nil
}

// TesseraTelemetry is Tessera with its metrics server on a free loopback
// port and device telemetry polled every poll (docs/metrics.md, Device
// telemetry), the attribution poll off (there is no kubelet): the same run
// then tells what telemetry costs prepares.
func TesseraTelemetry(binary, poll string, extra ...string) (Driver, error) {
	addr, err := freeAddress()
	if err != nil {
		return Driver{}, err
	}
	d := Tessera(binary, append([]string{"--metrics-address=" + addr, "--telemetry-poll=" + poll, "--attribution-poll=0"}, extra...)...)
	d.Label = "tessera-telemetry" // in claim and directory names
	return d, nil
}

// Reference is the dra-example-driver kubelet plugin (its gpu profile,
// eight devices); extra flags follow.
func Reference(binary string, extra ...string) Driver {
	return Driver{
		Label:      "dra-example-driver",
		DriverName: "gpu.example.com",
		Args: func(node, kubeconfig, dir, runDir string) ([]string, string) {
			argv := []string{binary,
				"--node-name=" + node, "--kubeconfig=" + kubeconfig, "--num-devices=8",
				"--cdi-root=" + filepath.Join(runDir, "cdi"),
				"--kubelet-plugins-directory-path=" + filepath.Join(dir, "plugins"),
				"--kubelet-registrar-directory-path=" + filepath.Join(dir, "registry"),
			}
			return append(argv, extra...), filepath.Join(dir, "plugins", "gpu.example.com", "dra.sock")
		},
	}
}

// Options size a run.
type Options struct {
	// Sequential is how many claims are prepared and unprepared one at a
	// time per round (latency).
	Sequential int
	// Waves of InFlight claims, each prepared by its own concurrent call,
	// then unprepared the same way (throughput).
	Waves, InFlight int
	// Rounds repeat both; results are medians over rounds.
	Rounds int
}

func (o Options) validate() error {
	if o.Sequential <= 0 || o.Waves <= 0 || o.InFlight <= 0 || o.Rounds <= 0 {
		return fmt.Errorf("sequential, waves, in-flight and rounds must be positive: %+v", o)
	}
	return nil
}
