package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestDryRunIsAValidYAMLStream decodes --dry-run output strictly as
// resource.k8s.io/v1 objects, as kubectl would on apply.
func TestDryRunIsAValidYAMLStream(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := resourceapi.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, tc := range []struct{ profile, partitioning string }{
		{"dgx-h100", "static"}, {"dgx-h100-mig", "static"}, {"mixed-inference", "static"}, {"dgx-h100", "dynamic"}, {"mixed-inference", "dynamic"},
	} {
		t.Run(tc.profile+"/"+tc.partitioning, func(t *testing.T) {
			c := &Config{NodeName: "node-1", Backend: "sim", SimProfile: tc.profile, SimStateDir: t.TempDir(), DryRun: true, Partitioning: tc.partitioning}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			b, err := NewBackend(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := DryRun(context.Background(), c.driverOptions(b), &out); err != nil {
				t.Fatal(err)
			}
			r := utilyaml.NewYAMLReader(bufioReader(&out))
			var devices, counterSets int
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "---" {
					continue
				}
				obj, gvk, err := decoder.Decode(doc, nil, nil)
				if err != nil {
					t.Fatalf("decode: %v\n%s", err, doc)
				}
				if gvk.Group != "resource.k8s.io" || gvk.Version != "v1" || gvk.Kind != "ResourceSlice" {
					t.Fatalf("got %v", gvk)
				}
				s := obj.(*resourceapi.ResourceSlice)
				if s.Spec.Driver != "gpu.tessera.dev" || *s.Spec.NodeName != "node-1" || s.Spec.Pool.Name != "node-1" {
					t.Errorf("slice spec %+v", s.Spec)
				}
				if !strings.HasPrefix(s.GenerateName, "0000") || !strings.HasSuffix(s.GenerateName, "-gpu.tessera.dev-node-1-") {
					t.Errorf("generateName %q", s.GenerateName)
				}
				devices += len(s.Spec.Devices)
				counterSets += len(s.Spec.SharedCounters)
			}
			if devices < 5 {
				t.Errorf("%d devices", devices)
			}
			if wantCounters := tc.partitioning == "dynamic" && tc.profile == "dgx-h100"; (counterSets > 0) != wantCounters {
				t.Errorf("%d counter sets published", counterSets)
			}
		})
	}
}

func TestBackendErrors(t *testing.T) {
	tests := []struct {
		cfg  Config
		want []string
	}{
		{Config{Backend: "sim", SimProfile: "dgx-h1000", NodeName: "n"}, []string{"--sim-profile", "dgx-h1000", "dgx-h100", "mi300x-8", "t4-2"}},
		{Config{Backend: "sim", SimProfile: "/nonexistent/machine.yaml", NodeName: "n"}, []string{"/nonexistent/machine.yaml"}},
		{Config{Backend: "cuda", NodeName: "n"}, []string{`"cuda"`, "sim, nvml, amd or auto"}},
		// No NVIDIA driver here: a clear startup error, not a crash.
		{Config{Backend: "nvml", NodeName: "n"}, []string{"--backend=nvml", "libnvidia-ml"}},
	}
	for _, tc := range tests {
		tc.cfg.SimStateDir = t.TempDir()
		_, err := NewBackend(context.Background(), &tc.cfg)
		if err == nil {
			t.Errorf("%+v: no error", tc.cfg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--sim-profile=l4-4"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TESSERA_SIM_PROFILE": "t4-2", "TESSERA_NODE_NAME": "from-env", "TESSERA_KUBE_API_QPS": "7"}
	if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.SimProfile != "l4-4" || c.NodeName != "from-env" || c.KubeAPIQPS != 7 {
		t.Errorf("config %+v: command line must win, environment fills the rest", c)
	}
	env["TESSERA_DRY_RUN"] = "maybe"
	if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil || !strings.Contains(err.Error(), "TESSERA_DRY_RUN") {
		t.Errorf("bad env value: %v", err)
	}
	if err := (&Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Errorf("missing node name: %v", err)
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

func TestAMDBackendFromFlags(t *testing.T) {
	ctx := context.Background()
	// --backend=amd on a fixture tree prints that machine's slices.
	c := &Config{NodeName: "node-1", Backend: "amd", SysfsRoot: "../../test/fixtures/amd/mi300x-8-cpx"}
	b, err := NewBackend(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := DryRun(ctx, c.driverOptions(b), &out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "partitionKind:\n        string: xcp"); n != 64 {
		t.Errorf("%d xcp partitions in the dry run, want 64 (8 cards of 8 XCDs in CPX mode)", n)
	}
	// auto finds the KFD topology when there is no NVIDIA library.
	c.Backend = "auto"
	if b, err := NewBackend(ctx, c); err != nil || b.Name() != "amd" {
		t.Errorf("auto on an AMD tree: %v, %v", b, err)
	}
	// auto with nothing to find names both reasons.
	c.SysfsRoot = t.TempDir()
	_, err = NewBackend(ctx, c)
	if err == nil || !strings.Contains(err.Error(), "nvml") || !strings.Contains(err.Error(), "amd") {
		t.Errorf("auto on an empty tree: %v", err)
	}
}

func TestPartitioningFlagIsChecked(t *testing.T) {
	c := &Config{NodeName: "n", Partitioning: "sometimes"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--partitioning") || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("err %v, want one naming --partitioning and the bad value", err)
	}
}

// Started without --backend on a real node, the agent must look for real
// GPUs, not publish simulated ones.
func TestDefaultBackendIsAuto(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.Backend != "auto" {
		t.Errorf("default backend %q, want auto", c.Backend)
	}
}

// TestMinShareIsolationFlag: a level the agent does not know is refused
// at start, naming the flag.
func TestMinShareIsolationFlag(t *testing.T) {
	c := &Config{NodeName: "node-1", Backend: "sim", SimProfile: "l4-4", Sharing: "capacity", MinShareIsolation: "strong"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--min-share-isolation") {
		t.Errorf("--min-share-isolation=strong: %v", err)
	}
	c.MinShareIsolation = "process"
	if err := c.Validate(); err != nil && strings.Contains(err.Error(), "--min-share-isolation") {
		t.Errorf("--min-share-isolation=process: %v", err)
	}
}

// TestTelemetryPollFlag: 10 s by default, from the environment too, and a
// negative one is refused at start, naming the flag; 0 (off) is valid.
func TestTelemetryPollFlag(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want time.Duration
		err  string
	}{
		{want: 10 * time.Second},
		{args: []string{"--telemetry-poll=30s"}, want: 30 * time.Second},
		{env: map[string]string{"TESSERA_TELEMETRY_POLL": "2s"}, want: 2 * time.Second},
		{args: []string{"--telemetry-poll=0"}, want: 0},
		{args: []string{"--telemetry-poll=-1s"}, err: "--telemetry-poll: -1s is negative"},
	}
	for _, tc := range tests {
		var c Config
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		c.AddFlags(fs)
		if err := fs.Parse(append([]string{"--node-name=n"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || c.TelemetryPoll != tc.want {
			t.Errorf("%v %v: %v, %v; want %v", tc.args, tc.env, c.TelemetryPoll, err, tc.want)
		}
	}
}
