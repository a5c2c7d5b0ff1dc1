package cdi

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// checkAgainstReadSpec writes spec as WriteClaimSpec encodes it and holds
// validateSpec to what the CDI library's ReadSpec (a container runtime
// loading the file) makes of the same bytes: both refuse it or both accept
// it, and an accepted file reads back as exactly spec.
func checkAgainstReadSpec(t *testing.T, spec *cdispec.Spec) (accepted bool) {
	t.Helper()
	data, err := marshalSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ours := validateSpec(spec, data, nil)
	read, lib := cdiapi.ReadSpec(path, 0)
	if (ours == nil) != (lib == nil) {
		t.Fatalf("validateSpec: %v; ReadSpec of the file: %v\n%s", ours, lib, data)
	}
	if lib == nil && !reflect.DeepEqual(read.Spec, spec) {
		t.Fatalf("ReadSpec reads back\n%+v\nnot\n%+v", read.Spec, spec)
	}
	return lib == nil
}

// claimSpecs are specs buildSpec writes: every vendor, partitions, mixed
// claims, MPS.
func claimSpecs(t *testing.T) map[string]*cdispec.Spec {
	t.Helper()
	w, _ := newTestWriter(t, simNumbers)
	mpsDev := dev(0, nvidiaGPU(1), migPartition(2, 0))
	mpsDev.Sharing = &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 40, MPSPinnedMemoryLimit: 4 << 30}
	mpsDev.MPSPipeDir = "/run/tessera/mps/" + uidA
	ts := dev(1, nvidiaGPU(2), nil)
	ts.Sharing = &sharing.Settings{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.LongTimeSlice}
	out := map[string]*cdispec.Spec{}
	for name, devs := range map[string][]ClaimDevice{
		"nvidia":     {dev(0, nvidiaGPU(0), nil)},
		"mig":        {dev(0, nvidiaGPU(3), migPartition(1, 0)), dev(1, nvidiaGPU(3), migPartition(2, 1))},
		"amd":        {dev(0, amdGPU(2), nil)},
		"mixed":      {dev(0, nvidiaGPU(2), migPartition(3, 0)), dev(1, amdGPU(1), nil)},
		"mps+sliced": {mpsDev, ts},
	} {
		spec, ids, err := w.buildSpec(ClaimSpec{Claim: ClaimRef{UID: uidA, Namespace: "ns", Name: "c"}, Devices: devs, Shared: []ClaimLevel{mpsLevel}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, err := marshalSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateSpec(spec, data, ids); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = spec
	}
	return out
}

func TestValidateMatchesReadSpec(t *testing.T) {
	for name, spec := range claimSpecs(t) {
		t.Run(name, func(t *testing.T) {
			if !checkAgainstReadSpec(t, spec) {
				t.Fatal("a spec buildSpec writes is refused")
			}
		})
	}
	// Each breaks one rule of the library; both must refuse the result.
	breaks := map[string]func(s *cdispec.Spec){
		"version below what annotations need": func(s *cdispec.Spec) { s.Version = "0.5.0" },
		"version not semver":                  func(s *cdispec.Spec) { s.Version = "latest" },
		"kind without class":                  func(s *cdispec.Spec) { s.Kind = "k8s.gpu.tessera.dev" },
		"vendor with a space":                 func(s *cdispec.Spec) { s.Kind = "k8s gpu/claim" },
		"class with a space":                  func(s *cdispec.Spec) { s.Kind = "k8s.gpu.tessera.dev/cl aim" },
		"no devices":                          func(s *cdispec.Spec) { s.Devices = nil },
		"device name with a slash":            func(s *cdispec.Spec) { s.Devices[0].Name = "a/b" },
		"empty device name":                   func(s *cdispec.Spec) { s.Devices[0].Name = "" },
		"duplicate device":                    func(s *cdispec.Spec) { s.Devices = append(s.Devices, s.Devices[0]) },
		"device without edits":                func(s *cdispec.Spec) { s.Devices[0].ContainerEdits = cdispec.ContainerEdits{} },
		"env without =":                       func(s *cdispec.Spec) { s.Devices[0].ContainerEdits.Env = []string{"CUDA"} },
		"device node without path":            func(s *cdispec.Spec) { s.Devices[0].ContainerEdits.DeviceNodes[0].Path = "" },
		"device node permission z":            func(s *cdispec.Spec) { s.Devices[0].ContainerEdits.DeviceNodes[0].Permissions = "rwz" },
		"device node type x":                  func(s *cdispec.Spec) { s.Devices[0].ContainerEdits.DeviceNodes[0].Type = "x" },
		"mount without container path": func(s *cdispec.Spec) {
			s.Devices[0].ContainerEdits.Mounts = []*cdispec.Mount{{HostPath: "/x"}}
		},
		"unknown hook": func(s *cdispec.Spec) {
			s.Devices[0].ContainerEdits.Hooks = []*cdispec.Hook{{HookName: "atBoot", Path: "/bin/true"}}
		},
		"spec-wide env without =": func(s *cdispec.Spec) { s.ContainerEdits.Env = []string{"X"} },
	}
	base := claimSpecs(t)["mixed"]
	for name, brk := range breaks {
		t.Run(name, func(t *testing.T) {
			s := deepCopySpec(t, base)
			brk(s)
			if checkAgainstReadSpec(t, s) {
				t.Fatal("both accept the broken spec")
			}
		})
	}
}

// The IDs handed out must name devices of the spec.
func TestValidateRefusesDanglingID(t *testing.T) {
	spec := claimSpecs(t)["nvidia"]
	data, err := marshalSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateSpec(spec, data, [][]string{{qualified("nope")}}); err == nil {
		t.Fatal("an ID without its device passed")
	}
	if err := validateSpec(spec, data, [][]string{{"nvidia.com/gpu=0"}}); err != nil {
		t.Fatalf("a vendor ID is the vendor spec's to resolve: %v", err)
	}
}

// FuzzValidateSpec puts arbitrary strings where a claim's values land in
// its spec (device name, env value, node path, annotation value) and holds
// validateSpec to ReadSpec on the written bytes. `go test` runs the seeds;
// `go test -fuzz FuzzValidateSpec ./internal/cdi` searches. Strings are valid
// UTF-8, as every string the API server hands out is: JSON encoding
// replaces invalid bytes, so such a spec would not read back as itself
// (testdata/fuzz holds one the fuzzer found).
func FuzzValidateSpec(f *testing.F) {
	f.Add("claim-0-gpu-0", "CUDA_VISIBLE_DEVICES=0", "/dev/nvidia0", `{"strategy":"MPS"}`)
	f.Add("a b", "X", "dev/x", "\u2028")
	f.Add("gpu:0", "A=\"quoted\" \\ back", "/dev/dri/renderD128", "line\nbreak\ttab")
	f.Add("n", "K=: colon # hash", "/dev/x y", "- dash\n? q")
	f.Add("é", "K=\x00", "/dev/\x7f", "\u00ff")
	f.Add("n", "K=\u0085\u009f", "/dev/\ufffe", "\U0001F600")
	f.Fuzz(func(t *testing.T, name, env, path, ann string) {
		for _, s := range []string{name, env, path, ann} {
			if !utf8.ValidString(s) {
				return
			}
		}
		spec := &cdispec.Spec{
			Version:     "0.6.0",
			Kind:        Kind,
			Annotations: map[string]string{annClaimName: ann},
			Devices: []cdispec.Device{{
				Name:        name,
				Annotations: map[string]string{annSharing: ann},
				ContainerEdits: cdispec.ContainerEdits{
					Env:         []string{env},
					DeviceNodes: []*cdispec.DeviceNode{{Path: path, HostPath: path, Type: "c", Major: 195, Minor: 0}},
				},
			}},
		}
		checkAgainstReadSpec(t, spec)
	})
}

func deepCopySpec(t *testing.T, s *cdispec.Spec) *cdispec.Spec {
	t.Helper()
	data, err := marshalSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	read, err := cdiapi.ParseSpec(data)
	if err != nil {
		t.Fatal(err)
	}
	return read
}
