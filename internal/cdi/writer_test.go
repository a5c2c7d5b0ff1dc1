package cdi

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

func readSpecFile(t *testing.T, path string) *cdispec.Spec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s cdispec.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestSpecFileShape(t *testing.T) {
	w, dir := newTestWriter(t, simNumbers)
	devs := []ClaimDevice{dev(0, nvidiaGPU(2), migPartition(3, 0)), dev(1, amdGPU(1), nil)}
	if _, err := writeSpec(w, ClaimRef{UID: uidA, Namespace: "ns", Name: "c"}, devs); err != nil {
		t.Fatal(err)
	}
	path := w.SpecPath(uidA)
	if want := filepath.Join(dir, "k8s.gpu.tessera.dev-claim_"+uidA+".json"); path != want {
		t.Errorf("SpecPath = %s, want %s", path, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	s := readSpecFile(t, path)
	if s.Kind != "k8s.gpu.tessera.dev/claim" {
		t.Errorf("kind %q", s.Kind)
	}
	// Annotations need 0.6.0; nothing else we use needs more.
	minV, _ := cdispec.MinimumRequiredVersion(s)
	if s.Version != minV || s.Version != "0.6.0" {
		t.Errorf("cdiVersion %q, minimum %q, want 0.6.0", s.Version, minV)
	}
	// The CDI library's own annotation check does not run on these maps
	// (v1.1.2 type-asserts map[string]any), so check the keys against the
	// rule it means to enforce.
	keys := slices.Collect(func(yield func(string) bool) {
		for k := range s.Annotations {
			yield(k)
		}
		for _, d := range s.Devices {
			for k := range d.Annotations {
				yield(k)
			}
		}
	})
	for _, k := range keys {
		if errs := validation.IsQualifiedName(strings.ToLower(k)); len(errs) != 0 {
			t.Errorf("annotation key %q: %v", k, errs)
		}
	}
}

func TestDevRootSlashGivesEqualPaths(t *testing.T) {
	w, err := NewWriter(Options{SpecDir: t.TempDir()}) // DevRoot defaults to "/dev"
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeSpec(w, ClaimRef{UID: uidA}, []ClaimDevice{dev(0, nvidiaGPU(0), nil)}); err != nil {
		t.Fatal(err)
	}
	for _, d := range readSpecFile(t, w.SpecPath(uidA)).Devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			if n.HostPath != n.Path {
				t.Errorf("host path %s != path %s with DevRoot /dev", n.HostPath, n.Path)
			}
			if n.Type != "" || n.Major != 0 {
				t.Errorf("%s has numbers without DeviceNumbers", n.Path)
			}
		}
	}
}

func TestNewWriterRejectsRelativeDevRoot(t *testing.T) {
	if _, err := NewWriter(Options{SpecDir: t.TempDir(), DevRoot: "sim/dev"}); err == nil {
		t.Fatal("want an error for a relative DevRoot")
	}
}

// Preparing a claim again must give the same file and IDs, so a retried
// prepare does not change what running containers resolve.
func TestWriteIsIdempotent(t *testing.T) {
	w, _ := newTestWriter(t, simNumbers)
	devs := []ClaimDevice{dev(0, nvidiaGPU(0), nil), dev(1, amdGPU(1), nil)}
	claim := ClaimRef{UID: uidA, Namespace: "ns", Name: "c"}
	ids1, err := writeSpec(w, claim, devs)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(w.SpecPath(uidA))
	ids2, err := writeSpec(w, claim, devs)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := os.ReadFile(w.SpecPath(uidA))
	if !reflect.DeepEqual(ids1, ids2) || !bytes.Equal(b1, b2) {
		t.Error("second write differs from the first")
	}
}

// Two claims on the same physical devices get distinct names, so both
// specs load without a CDI conflict and each ID resolves.
func TestClaimsDoNotShareNames(t *testing.T) {
	w, dir := newTestWriter(t, simNumbers)
	devs := []ClaimDevice{dev(0, nvidiaGPU(0), nil)}
	idsA, err := writeSpec(w, ClaimRef{UID: uidA}, devs)
	if err != nil {
		t.Fatal(err)
	}
	idsB, err := writeSpec(w, ClaimRef{UID: uidB}, devs)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range flatten(idsA) {
		if slices.Contains(flatten(idsB), id) {
			t.Errorf("ID %s used by both claims", id)
		}
	}
	if _, err := inject(t, dir, append(flatten(idsA), flatten(idsB)...)...); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveClaimSpec(t *testing.T) {
	w, dir := newTestWriter(t, simNumbers)
	ids, err := writeSpec(w, ClaimRef{UID: uidA}, []ClaimDevice{dev(0, nvidiaGPU(0), nil)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second removal finds nothing and is fine
		if err := w.RemoveClaimSpec(uidA); err != nil {
			t.Fatalf("RemoveClaimSpec #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(w.SpecPath(uidA)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spec still there: %v", err)
	}
	if _, err := inject(t, dir, flatten(ids)...); err == nil {
		t.Error("removed claim's IDs still resolve")
	}
	if err := w.RemoveClaimSpec("../../etc/passwd"); err == nil {
		t.Error("RemoveClaimSpec accepted a path as UID")
	}
}

func TestWriteClaimSpecRejects(t *testing.T) {
	nvXCP := dev(0, nvidiaGPU(0), &inventory.Partition{Kind: inventory.PartitionXCP, UUID: "x"})
	amdMIG := dev(0, amdGPU(0), migPartition(1, 0))
	badGI := dev(0, nvidiaGPU(0), migPartition(15, 0))
	noUUID := dev(0, nvidiaGPU(0), nil)
	noUUID.GPU.UUID = ""
	negMinor := dev(0, nvidiaGPU(0), nil)
	negMinor.GPU.Minor = -1
	unknown := dev(0, nvidiaGPU(0), nil)
	unknown.GPU.Vendor = "intel"
	zeroMajor := func(string) (int64, int64, bool) { return 0, 3, true }

	tests := []struct {
		name    string
		uid     string
		devs    []ClaimDevice
		numbers func(string) (int64, int64, bool)
		wantErr string
	}{
		{name: "empty UID", uid: "", devs: []ClaimDevice{dev(0, nvidiaGPU(0), nil)}, wantErr: "claim UID"},
		{name: "path in UID", uid: "../x", devs: []ClaimDevice{dev(0, nvidiaGPU(0), nil)}, wantErr: "claim UID"},
		{name: "no devices", uid: uidA, wantErr: "no devices"},
		{name: "unknown vendor", uid: uidA, devs: []ClaimDevice{unknown}, wantErr: `vendor "intel"`},
		{name: "NVIDIA partition not MIG", uid: uidA, devs: []ClaimDevice{nvXCP}, wantErr: "want \"mig\""},
		{name: "AMD partition not XCP", uid: uidA, devs: []ClaimDevice{amdMIG}, wantErr: "want \"xcp\""},
		{name: "MIG GI out of range", uid: uidA, devs: []ClaimDevice{badGI}, wantErr: "GPU instance ID 15"},
		{name: "NVIDIA without UUID", uid: uidA, devs: []ClaimDevice{noUUID}, wantErr: "no UUID"},
		{name: "negative minor", uid: uidA, devs: []ClaimDevice{negMinor}, wantErr: "negative"},
		{name: "major 0 from DeviceNumbers", uid: uidA, devs: []ClaimDevice{dev(0, nvidiaGPU(0), nil)}, numbers: zeroMajor, wantErr: "not usable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			numbers := tt.numbers
			if numbers == nil {
				numbers = simNumbers
			}
			w, dir := newTestWriter(t, numbers)
			// A spec from an earlier prepare of the claim must survive a
			// failed rewrite.
			var before []byte
			if tt.uid == uidA {
				if _, err := writeSpec(&Writer{specDir: w.specDir, devRoot: w.devRoot, numbers: simNumbers},
					ClaimRef{UID: uidA}, []ClaimDevice{dev(0, nvidiaGPU(0), nil)}); err != nil {
					t.Fatal(err)
				}
				before, _ = os.ReadFile(w.SpecPath(uidA))
			}
			_, err := writeSpec(w, ClaimRef{UID: tt.uid, Namespace: "ns", Name: "c"}, tt.devs)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			entries, _ := os.ReadDir(dir)
			if before == nil && len(entries) != 0 {
				t.Errorf("files left after a failed write: %v", entries)
			}
			if before != nil {
				if after, _ := os.ReadFile(w.SpecPath(uidA)); !bytes.Equal(before, after) || len(entries) != 1 {
					t.Errorf("failed write changed the spec dir (%d entries)", len(entries))
				}
			}
		})
	}
}

// A write that fails after the temp file is complete (here: the rename,
// because a directory squats on the spec's name) leaves no spec and no
// temp file behind.
func TestFailedWriteLeavesNoFile(t *testing.T) {
	w, dir := newTestWriter(t, simNumbers)
	if err := os.MkdirAll(filepath.Join(w.SpecPath(uidA), "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := writeSpec(w, ClaimRef{UID: uidA}, []ClaimDevice{dev(0, nvidiaGPU(0), nil)}); err == nil {
		t.Fatal("want an error")
	}
	if l := tmpFiles(t, dir); len(l) != 0 {
		t.Errorf("temp files left: %v", l)
	}
	if st, err := os.Stat(w.SpecPath(uidA)); err != nil || !st.IsDir() {
		t.Errorf("spec path changed: %v", err)
	}
}

func TestListClaimSpecs(t *testing.T) {
	w, dir := newTestWriter(t, simNumbers)

	if got, err := w.ListClaimSpecs(); err != nil || len(got) != 0 {
		t.Fatalf("empty dir: %v, %v", got, err)
	}

	claimA := ClaimRef{UID: uidA, Namespace: "ns-a", Name: "train"}
	devsA := []ClaimDevice{
		{Request: "nv", Pool: "node-1", Device: "gpu-0", GPU: nvidiaGPU(0)},
		{Request: "amd", Pool: "node-1", Device: "gpu-1", GPU: amdGPU(1)},
	}
	claimB := ClaimRef{UID: uidB, Namespace: "ns-b", Name: "infer"}
	devsB := []ClaimDevice{{Request: "mig", Pool: "node-1", Device: "gpu-2-mig-1g-3-0", GPU: nvidiaGPU(2), Partition: migPartition(3, 0)}}
	idsA, err := writeSpec(w, claimA, devsA)
	if err != nil {
		t.Fatal(err)
	}
	idsB, err := writeSpec(w, claimB, devsB)
	if err != nil {
		t.Fatal(err)
	}
	want := []RecordedClaim{
		{Claim: claimB, Devices: []checkpoint.Device{
			{Request: "mig", Pool: "node-1", Device: "gpu-2-mig-1g-3-0", CDIDeviceIDs: idsB[0], GPUUUID: nvidiaGPU(2).UUID, PartitionUUID: migPartition(3, 0).UUID},
		}},
		{Claim: claimA, Devices: []checkpoint.Device{
			{Request: "nv", Pool: "node-1", Device: "gpu-0", CDIDeviceIDs: idsA[0], GPUUUID: nvidiaGPU(0).UUID},
			{Request: "amd", Pool: "node-1", Device: "gpu-1", CDIDeviceIDs: idsA[1], GPUUUID: amdGPU(1).UUID},
		}},
	}

	// Files that are not ours, or not specs, are ignored.
	foreign := `{"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}]}`
	for name, content := range map[string]string{
		"nvidia.com-gpu.json": foreign,
		"k8s.gpu.tessera.dev-claim_" + uidA + ".json.123.tmp": "partial",
		"README": "x",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := w.ListClaimSpecs()
	if err != nil {
		t.Fatalf("ListClaimSpecs: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListClaimSpecs:\n got %+v\nwant %+v", got, want)
	}

	// A broken spec of ours is reported by name; the others still come back.
	bad := filepath.Join(dir, "k8s.gpu.tessera.dev-claim_deadbeef.json")
	if err := os.WriteFile(bad, []byte(`{"cdiVersion":`), 0o644); err != nil {
		t.Fatal(err)
	}
	// So is a spec whose recorded UID disagrees with its file name.
	data, _ := os.ReadFile(w.SpecPath(uidA))
	renamed := w.SpecPath("0000-renamed")
	if err := os.WriteFile(renamed, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = w.ListClaimSpecs()
	if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), renamed) {
		t.Errorf("err = %v, want it to name %s and %s", err, bad, renamed)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with a bad file:\n got %+v\nwant %+v", got, want)
	}

	// Removed claims disappear from the listing.
	if err := w.RemoveClaimSpec(uidB); err != nil {
		t.Fatal(err)
	}
	got, _ = w.ListClaimSpecs()
	if len(got) != 1 || got[0].Claim != claimA {
		t.Errorf("after removing B: %+v", got)
	}
}
