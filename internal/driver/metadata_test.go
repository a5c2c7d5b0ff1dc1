package driver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// readMetadata decodes the metadata file the helper wrote for the claim's
// request, as a container's reader would (the library's decoder).
func (n *node) readMetadata(claim, request string) (*metadata.DeviceMetadata, error) {
	data, err := os.ReadFile(filepath.Join(n.dir, "plugin", metadataDir, "default_"+claim, request, "metadata.json"))
	if err != nil {
		return nil, err
	}
	var md metadata.DeviceMetadata
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(bytes.NewReader(data)), &md); err != nil {
		return nil, err
	}
	return &md, nil
}

// mounted resolves the claim's CDI IDs with the CDI library, as the runtime
// does, and returns where the metadata file is mounted in the container
// and from where on the host.
func (n *node) mounted(ids []string) map[string]string {
	n.t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(n.cdiDir()), cdiapi.WithAutoRefresh(false))
	if err != nil {
		n.t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, ids...); err != nil {
		n.t.Fatalf("inject %v: %v", ids, err)
	}
	out := map[string]string{}
	for _, m := range spec.Mounts {
		out[m.Destination] = m.Source
	}
	return out
}

func attrString(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.VersionValue != nil:
		return *a.VersionValue
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil && *a.BoolValue:
		return "true"
	}
	return "false"
}

// TestDeviceMetadata: each prepared device's metadata file holds what it
// is published with and what prepare settled (a carved MIG instance's
// UUID, a share's memory, a passed GPU's bus ID and group), the runtime
// mounts it where KEP-5304 says, and it goes with the unprepare.
func TestDeviceMetadata(t *testing.T) {
	cases := []struct {
		name  string
		node  *node
		claim func(n *node) *drapbv1.Claim
		// want are attributes that must be there, by name; a value of ""
		// only says present.
		want func(n *node) map[string]string
	}{
		{"whole GPU", &node{profile: "dgx-h100"}, func(n *node) *drapbv1.Claim { return n.addClaim("c", "gpu-2") },
			func(n *node) map[string]string {
				g := n.driver.Published().Devices["gpu-2"].GPU
				return map[string]string{"model": "H100", "type": "gpu", "uuid": g.UUID, "resource.kubernetes.io/pciBusID": g.PCIBusID, "driverVersion": g.DriverVersion}
			}},
		{"MIG slice carved at prepare", &node{profile: "dgx-h100", partitioning: publish.Dynamic}, func(n *node) *drapbv1.Claim { return n.addClaim("c", "gpu-7-mig-1g-10gb-6") },
			func(n *node) map[string]string {
				uuid := n.checkpointClaims()["uid-c"].Devices[0].PartitionUUID
				return map[string]string{"type": "partition", "profile": "1g.10gb", "uuid": uuid, "gpuInstance": ""}
			}},
		{"capacity share", &node{profile: "l4-4", sharing: publish.SharingCapacity, mps: true}, func(n *node) *drapbv1.Claim { return n.addShareClaim("c", "gpu-1", "7Gi") },
			func(n *node) map[string]string {
				return map[string]string{"model": "L4", "shareMemory": strconv.FormatInt(7<<30, 10), "shareEnforced": "true", "memoryIsolation": ""}
			}},
		{"passed through", &node{profile: "mi300x-8", passthrough: true}, func(n *node) *drapbv1.Claim { return n.addClassClaim("c", names.VFIOClass, "", "gpu-4") },
			func(n *node) map[string]string {
				g := n.driver.Published().Passed["gpu-4"].GPU
				return map[string]string{"model": "MI300X", "resource.kubernetes.io/pciBusID": g.PCIBusID, "passthrough": "true", "iommuGroup": ""}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			request := "gpus"
			if tc.node.sharing != "" {
				request = "gpu" // addShareClaim's
			}
			tc.node.metadata = true
			n := launch(t, tc.node)
			claim := tc.claim(n)
			resp := n.prepare(claim)
			if msg := resp.Claims[claim.Uid].GetError(); msg != "" {
				t.Fatalf("prepare: %s", msg)
			}
			md, err := n.readMetadata("c", request)
			if err != nil {
				t.Fatal(err)
			}
			if len(md.Requests) != 1 || len(md.Requests[0].Devices) != 1 || md.Name != "c" || md.UID != "uid-c" {
				t.Fatalf("metadata %+v, want claim c's one device", md)
			}
			attrs := md.Requests[0].Devices[0].Attributes
			for k, v := range tc.want(n) {
				got, ok := attrs[resourceapi.QualifiedName(k)]
				if !ok {
					t.Errorf("no %s in %v", k, attrs)
				} else if v != "" && attrString(got) != v {
					t.Errorf("%s = %s, want %s", k, attrString(got), v)
				}
			}
			var ids []string
			for _, d := range resp.Claims[claim.Uid].Devices {
				ids = append(ids, d.CdiDeviceIds...)
			}
			want := metadata.ResourceClaimFilePath(names.DriverName, "c", request)
			if src, ok := n.mounted(ids)[want]; !ok || src != filepath.Join(n.dir, "plugin", metadataDir, "default_c", request, "metadata.json") {
				t.Errorf("metadata mounted at %v, want %s", n.mounted(ids), want)
			}
			if msg := n.unprepare(claim).Claims[claim.Uid].GetError(); msg != "" {
				t.Fatalf("unprepare: %s", msg)
			}
			if _, err := n.readMetadata("c", request); !os.IsNotExist(err) {
				t.Errorf("metadata after unprepare: %v", err)
			}
		})
	}
}

// TestDeviceMetadataAfterRestart: a restarted agent answers the kubelet's
// repeated prepare of a passed GPU from its checkpoint, and the helper
// writes the file again from that: still with the PCI address KubeVirt
// reads, though the backend no longer lists the GPU.
func TestDeviceMetadataAfterRestart(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", passthrough: true, metadata: true})
	bdf := n.driver.Published().Devices["gpu-5"].GPU.PCIBusID
	claim := n.addClassClaim("c", names.VFIOClass, "", "gpu-5")
	if msg := n.prepare(claim).Claims[claim.Uid].GetError(); msg != "" {
		t.Fatal(msg)
	}
	n.stop()
	n.start()
	if msg := n.prepare(claim).Claims[claim.Uid].GetError(); msg != "" {
		t.Fatal(msg)
	}
	md, err := n.readMetadata("c", "gpus")
	if err != nil {
		t.Fatal(err)
	}
	got := md.Requests[0].Devices[0].Attributes["resource.kubernetes.io/pciBusID"]
	if got.StringValue == nil || *got.StringValue != bdf {
		t.Errorf("pciBusID after the restart %v, want %s", got.StringValue, bdf)
	}
}

// TestMetadataSweep: files of claims the checkpoint does not record (a
// crash after an unprepare, before the helper removed them) go at start;
// a prepared claim's stay.
func TestMetadataSweep(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", metadata: true})
	claim := n.addClaim("kept", "gpu-1")
	if msg := n.prepare(claim).Claims[claim.Uid].GetError(); msg != "" {
		t.Fatal(msg)
	}
	n.stop()
	staleSpec := filepath.Join(n.cdiDir(), names.DriverName+"_metadata_0b9e6c1d-2f3a-4b5c-8d7e-9f0a1b2c3d4e_gpus.json")
	staleDir := filepath.Join(n.dir, "plugin", metadataDir, "default_gone")
	if err := os.MkdirAll(filepath.Join(staleDir, "gpus"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staleSpec, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.start()
	for _, p := range []string{staleSpec, staleDir} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", p, err)
		}
	}
	if _, err := n.readMetadata("kept", "gpus"); err != nil {
		t.Errorf("the prepared claim's metadata: %v", err)
	}
	specs, _ := filepath.Glob(filepath.Join(n.cdiDir(), names.DriverName+"_metadata_uid-kept_*.json"))
	if !slices.Equal(specs, []string{filepath.Join(n.cdiDir(), names.DriverName+"_metadata_uid-kept_gpus.json")}) {
		t.Errorf("the prepared claim's metadata specs: %v", specs)
	}
}

// TestMetadataOfReleasedClaim: a claim released as stale (deleted while
// the kubelet was away, its device allocated to another claim) is never
// unprepared by the kubelet, so the helper never removes its metadata;
// the agent removes its spec and files when it releases it.
func TestMetadataOfReleasedClaim(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", metadata: true})
	old := n.addClaim("old", "gpu-0")
	if msg := n.prepare(old).Claims[old.Uid].GetError(); msg != "" {
		t.Fatal(msg)
	}
	spec := filepath.Join(n.cdiDir(), names.DriverName+"_metadata_"+old.Uid+"_gpus.json")
	dir := filepath.Join(n.dir, "plugin", metadataDir, "default_old")
	for _, p := range []string{spec, dir} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the prepared claim's metadata: %v", err)
		}
	}
	if err := n.client.ResourceV1().ResourceClaims("default").Delete(n.ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := n.addClaim("next", "gpu-0")
	if msg := n.prepare(next).Claims[next.Uid].GetError(); msg != "" {
		t.Fatalf("prepare of the claim allocated a deleted claim's device: %s", msg)
	}
	for _, p := range []string{spec, dir} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s of the released claim left: %v", p, err)
		}
	}
	if _, err := n.readMetadata("next", "gpus"); err != nil {
		t.Errorf("the next claim's metadata: %v", err)
	}
}
