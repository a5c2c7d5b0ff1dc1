package cdi

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/golden"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// goldenDevRoot stands in for the simulator's /dev: fixed, so host paths in
// the golden files do not depend on the test's temp dir.
const goldenDevRoot = "/var/lib/tessera-sim/dev"

const goldenMPSPipes = "/run/tessera/mps/uid-mps"

type goldenClaim struct {
	file  string
	claim ClaimRef
	devs  []ClaimDevice
}

// goldenClaims are one claim per kind of recorded device: whole GPUs of
// both vendors with a time-slice and a static partition; a partition under
// the claim's MPS daemon; capacity shares (enforced, accounting only, a
// whole multi-allocatable device).
func goldenClaims() []goldenClaim {
	mi := int64(1 << 20)
	whole := nvidiaGPU(0)
	sliced := nvidiaGPU(1)
	mig := nvidiaGPU(2)
	shared := nvidiaGPU(3)
	return []goldenClaim{
		{file: "spec-whole.json", claim: ClaimRef{UID: "uid-whole", Namespace: "ns-a", Name: "train"}, devs: []ClaimDevice{
			{Request: "gpus", Pool: "node-1", Device: "gpu-0", GPU: whole},
			{Request: "gpus", Pool: "node-1", Device: "gpu-1", GPU: sliced,
				Sharing: &sharing.Settings{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.LongTimeSlice}},
			{Request: "static", Pool: "node-1", Device: "gpu-2-mig-1g-10gb-3-0", GPU: mig, Partition: migPartition(3, 0)},
			{Request: "amd", Pool: "node-1", Device: "gpu-4", GPU: amdGPU(4)},
		}},
		{file: "spec-mps.json", claim: ClaimRef{UID: "uid-mps", Namespace: "ns-a", Name: "infer"}, devs: []ClaimDevice{
			{Request: "mig", Pool: "node-1", Device: "gpu-2-mig-1g-10gb-5-0", GPU: mig, Partition: migPartition(5, 0),
				Sharing:    &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 50, MPSPinnedMemoryLimit: 4096 * mi},
				MPSPipeDir: goldenMPSPipes},
		}},
		{file: "spec-shares.json", claim: ClaimRef{UID: "uid-shares", Namespace: "ns-b", Name: "shares"}, devs: []ClaimDevice{
			{Request: "nv", Pool: "node-1", Device: "gpu-3", GPU: shared, ShareID: "0f6c1e2d-share-nv",
				Sharing: &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 50, MPSPinnedMemoryLimit: 8192 * mi,
					Share: &sharing.Share{ID: "0f6c1e2d-share-nv", MemoryBytes: 8192 * mi, ComputeUnits: 29, Enforced: true}},
				MPSPipeDir: "/run/tessera/mps/device-gpu-3"},
			{Request: "amd", Pool: "node-1", Device: "gpu-5", GPU: amdGPU(5), ShareID: "0f6c1e2d-share-amd",
				Sharing: &sharing.Settings{Share: &sharing.Share{ID: "0f6c1e2d-share-amd", MemoryBytes: 16384 * mi}}},
			{Request: "whole", Pool: "node-1", Device: "gpu-6", GPU: nvidiaGPU(6), ShareID: "0f6c1e2d-share-whole"},
		}},
	}
}

// What a claim spec records, spec by spec: the CDI spec files are written
// byte for byte as testdata/spec-*.json.
func TestGoldenSpecs(t *testing.T) {
	w, dir := newTestWriterAt(t, goldenDevRoot)
	for _, g := range goldenClaims() {
		t.Run(g.file, func(t *testing.T) {
			if _, err := writeSpec(w, g.claim, g.devs); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, specFilePrefix+g.claim.UID+specFileExt))
			if err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, filepath.Join("testdata", g.file), got)
		})
	}
}

// recorded is what recovery reads of one device from a claim spec.
type recorded struct {
	Request, Pool, Device  string
	CDIDeviceIDs           []string
	GPUUUID, PartitionUUID string
	ShareID                string
	Sharing                *sharing.Settings
}

// The golden spec files, as an agent finds them after losing its
// checkpoint, read back as the devices they were written for.
func TestGoldenSpecsRead(t *testing.T) {
	w, dir := newTestWriterAt(t, goldenDevRoot)
	want := map[ClaimRef][]recorded{}
	const prefix = "k8s.gpu.tessera.dev/claim="
	for _, g := range goldenClaims() {
		data, err := os.ReadFile(filepath.Join("testdata", g.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, specFilePrefix+g.claim.UID+specFileExt), data, 0o644); err != nil {
			t.Fatal(err)
		}
		// A claim of several requests: each device names its request's
		// claim-level devices (scope.go).
		scopes := requestScopes(g.devs)
		for i, d := range g.devs {
			r := recorded{Request: d.Request, Pool: d.Pool, Device: d.Device, GPUUUID: d.GPU.UUID, ShareID: d.ShareID, Sharing: d.Sharing,
				CDIDeviceIDs: []string{prefix + deviceName(g.claim.UID, i, d.Device), prefix + g.claim.UID + "-common-" + string(d.GPU.Vendor) + scopes[i]}}
			if d.Partition != nil {
				r.PartitionUUID = d.Partition.UUID
			}
			if d.Sharing.IsMPS() {
				r.CDIDeviceIDs = append(r.CDIDeviceIDs, prefix+g.claim.UID+"-mps"+scopes[i])
			}
			want[g.claim] = append(want[g.claim], r)
		}
	}
	recs, err := w.ListClaimSpecs()
	if err != nil {
		t.Fatal(err)
	}
	got := map[ClaimRef][]recorded{}
	for _, rc := range recs {
		for _, d := range rc.Devices {
			got[rc.Claim] = append(got[rc.Claim], recorded{Request: d.Request, Pool: d.Pool, Device: d.Device, CDIDeviceIDs: d.CDIDeviceIDs,
				GPUUUID: d.GPUUUID, PartitionUUID: d.PartitionUUID, ShareID: d.ShareID, Sharing: d.Sharing})
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListClaimSpecs:\n got %+v\nwant %+v", got, want)
	}
}

func newTestWriterAt(t *testing.T, devRoot string) (*Writer, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := NewWriter(Options{SpecDir: dir, DevRoot: devRoot, DeviceNumbers: simNumbers})
	if err != nil {
		t.Fatal(err)
	}
	return w, dir
}
