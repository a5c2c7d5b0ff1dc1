package cdi

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/mps"
)

const (
	uidA = "6f1c2a9e-8d0b-4e53-9a57-0c1d2e3f4a5b"
	uidB = "0b9e6c1d-2f3a-4b5c-8d7e-9f0a1b2c3d4e"
)

func nvidiaGPU(minor int) inventory.GPU {
	return inventory.GPU{
		Vendor: inventory.VendorNVIDIA, Model: "H100",
		UUID:  fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", minor),
		Minor: minor,
	}
}

func amdGPU(minor int) inventory.GPU {
	return inventory.GPU{
		Vendor: inventory.VendorAMD, Model: "MI300X",
		UUID:  fmt.Sprintf("amd-%d", minor),
		Minor: minor, RenderMinor: 128 + minor,
	}
}

func migPartition(gi, ci int) *inventory.Partition {
	return &inventory.Partition{
		Kind: inventory.PartitionMIG, Profile: "1g.10gb",
		UUID:          fmt.Sprintf("MIG-11111111-2222-3333-4444-%012d", gi*10+ci),
		GPUInstanceID: gi, ComputeInstanceID: ci,
	}
}

func dev(i int, g inventory.GPU, p *inventory.Partition) ClaimDevice {
	return ClaimDevice{Request: "gpus", Pool: "node-a", Device: "gpu-" + strconv.Itoa(i), GPU: g, Partition: p}
}

// simNumbers mimics a simulator backend: fixed, made-up numbers for every
// node, so nothing on the host needs to exist.
func simNumbers(p string) (int64, int64, bool) {
	for _, r := range []struct {
		prefix string
		major  int64
	}{
		{"nvidia-caps/nvidia-cap", 511},
		{"dri/renderD", 226},
		{"dri/card", 226},
		{"nvidia", 195},
	} {
		if n, err := strconv.Atoi(strings.TrimPrefix(p, r.prefix)); err == nil && strings.HasPrefix(p, r.prefix) {
			return r.major, int64(n), true
		}
	}
	switch p {
	case "nvidiactl":
		return 195, 255, true
	case "nvidia-uvm":
		return 510, 0, true
	case "nvidia-uvm-tools":
		return 510, 1, true
	case "kfd":
		return 235, 0, true
	}
	return 0, 0, false
}

// node is what a container gets for one device node.
type node struct {
	Path         string
	Type         string
	Major, Minor int64
}

func (n node) String() string { return fmt.Sprintf("%s %s %d:%d", n.Path, n.Type, n.Major, n.Minor) }

// inject resolves ids with the real CDI library against dir, the way a
// container runtime does, into an empty OCI spec.
func inject(t *testing.T, dir string, ids ...string) (*oci.Spec, error) {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	for path, errs := range cache.GetErrors() {
		t.Fatalf("CDI cache error in %s: %v", path, errs)
	}
	spec := &oci.Spec{}
	_, err = cache.InjectDevices(spec, ids...)
	return spec, err
}

// devicesOf returns the container's device nodes sorted by path, failing on
// a path given twice.
func devicesOf(t *testing.T, s *oci.Spec) []node {
	t.Helper()
	if s.Linux == nil {
		return nil
	}
	var out []node
	seen := map[string]bool{}
	for _, d := range s.Linux.Devices {
		if seen[d.Path] {
			t.Errorf("device %s injected twice", d.Path)
		}
		seen[d.Path] = true
		out = append(out, node{d.Path, d.Type, d.Major, d.Minor})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// allowedOf returns the cgroup allow rules, deduplicated and sorted.
func allowedOf(s *oci.Spec) []node {
	if s.Linux == nil || s.Linux.Resources == nil {
		return nil
	}
	var out []node
	for _, r := range s.Linux.Resources.Devices {
		if !r.Allow || r.Major == nil || r.Minor == nil || r.Access != "rwm" {
			continue
		}
		n := node{Type: r.Type, Major: *r.Major, Minor: *r.Minor}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Major < out[j].Major || out[i].Major == out[j].Major && out[i].Minor < out[j].Minor
	})
	return out
}

func envOf(s *oci.Spec) []string {
	if s.Process == nil {
		return nil
	}
	return s.Process.Env
}

func flatten(ids [][]string) []string {
	var out []string
	for _, l := range ids {
		out = append(out, l...)
	}
	return out
}

// tmpFiles lists leftover temp files in dir.
func tmpFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newTestWriter(t *testing.T, numbers func(string) (int64, int64, bool)) (*Writer, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cdi") // not there yet: NewWriter creates it
	w, err := NewWriter(Options{SpecDir: dir, DevRoot: t.TempDir(), DeviceNumbers: numbers})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("spec dir not created: %v", err)
	}
	return w, dir
}

// writeSpec writes the claim's spec as the claims package assembles it
// for devices under MPS: the MPS effect's claim-level device (its
// effect_mps.go) built from mps.ClientEdits.
func writeSpec(w *Writer, claim ClaimRef, devs []ClaimDevice) ([][]string, error) {
	return w.WriteClaim(ClaimSpec{Claim: claim, Devices: devs, Shared: []ClaimLevel{mpsLevel}})
}

var mpsLevel = ClaimLevel{
	Name:  "mps",
	Joins: func(d *ClaimDevice) bool { return d.Sharing.IsMPS() },
	Edits: func(devs []ClaimDevice) (Edits, error) {
		clients := make([]mps.Client, len(devs))
		for i := range devs {
			d := &devs[i]
			clients[i] = mps.Client{Name: d.Name(), PipeDir: d.MPSPipeDir, UUID: d.UUID(),
				PinnedMemoryLimit: d.Sharing.MPSPinnedMemoryLimit, ActiveThreadPercentage: d.Sharing.MPSActiveThreadPercentage}
		}
		env, mount, err := mps.ClientEdits(clients)
		if err != nil {
			return Edits{}, err
		}
		return Edits{Env: env, Mounts: []*cdispec.Mount{mount}}, nil
	},
}
