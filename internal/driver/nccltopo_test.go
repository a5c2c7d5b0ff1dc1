package driver

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/runtime-spec/specs-go"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/nccltopo"
)

const ncclTopoConfig = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":true}}`

// gpuRanks reads a topology file's GPUs: bus IDs by rank.
var gpuRankRE = regexp.MustCompile(`<pci busid="([^"]+)" class="0x(?:03|12)[0-9a-f]{4}"[^>]*>\s*<gpu [^>]*rank="([0-9]+)"`)

func gpuRanks(t *testing.T, xml []byte) []string {
	t.Helper()
	ms := gpuRankRE.FindAllStringSubmatch(string(xml), -1)
	out := make([]string, len(ms))
	for _, m := range ms {
		r, err := strconv.Atoi(m[2])
		if err != nil || r < 0 || r >= len(ms) || out[r] != "" {
			t.Fatalf("rank %q of %s: not a rank of %d GPUs once", m[2], m[1], len(ms))
		}
		out[r] = m[1]
	}
	return out
}

func topoMount(s *ocispec.Spec) []ocispec.Mount {
	var out []ocispec.Mount
	for _, m := range s.Mounts {
		if m.Destination == nccltopo.ContainerPath {
			out = append(out, m)
		}
	}
	return out
}

func hasEnv(s *ocispec.Spec, key string) bool {
	return slices.ContainsFunc(s.Process.Env, func(e string) bool { return strings.HasPrefix(e, key+"=") })
}

// containerIDs are the CDI device IDs of every device of a prepared claim:
// what the kubelet gives a container that uses all of it.
func containerIDs(t *testing.T, r *drapbv1.NodePrepareResourceResponse) []string {
	t.Helper()
	if r.GetError() != "" {
		t.Fatalf("prepare: %s", r.GetError())
	}
	var ids []string
	for _, d := range r.Devices {
		ids = append(ids, d.CdiDeviceIds...)
	}
	return ids
}

// TestNCCLTopoFile prepares a 4-GPU claim asking for the topology file on
// a DGX H100, allocated out of order: the container gets the file, whole
// and valid, of exactly its GPUs, and CUDA_VISIBLE_DEVICES in the file's
// rank order; unprepare removes it. A claim that does not ask, and a claim
// of one GPU, get none of it.
func TestNCCLTopoFile(t *testing.T) {
	for _, tc := range []struct {
		profile, visible, prefix string
		devices                  []string
		dialect                  nccltopo.Dialect
	}{
		{"dgx-h100", "CUDA_VISIBLE_DEVICES", "", []string{"gpu-6", "gpu-1", "gpu-4", "gpu-3"}, nccltopo.NCCL},
		{"mi300x-8", "HIP_VISIBLE_DEVICES", "GPU-", []string{"gpu-5", "gpu-0", "gpu-2"}, nccltopo.RCCL},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			n := newNode(t, tc.profile)
			pub := n.driver.Published()
			c := n.addConfiguredClaim("train", ncclTopoConfig, tc.devices...)
			oci := resolve(t, n.cdiDir(), containerIDs(t, n.prepare(c).Claims[c.Uid]))

			ms := topoMount(oci)
			if len(ms) != 1 {
				t.Fatalf("mounts at %s: %+v, want one", nccltopo.ContainerPath, ms)
			}
			m := ms[0]
			if !slices.Contains(m.Options, "ro") || filepath.Dir(m.Source) != filepath.Join(n.cdiDir(), "k8s.gpu.tessera.dev-nccl-topo") {
				t.Errorf("mount %+v: want read-only from the CDI dir's topology directory", m)
			}
			if got := envValue(oci, "NCCL_TOPO_FILE"); got != nccltopo.ContainerPath {
				t.Errorf("NCCL_TOPO_FILE = %q, want %s", got, nccltopo.ContainerPath)
			}
			xml, err := os.ReadFile(m.Source)
			if err != nil {
				t.Fatal(err)
			}
			if err := nccltopo.Check(xml, tc.dialect); err != nil {
				t.Fatalf("file fails Check: %v\n%s", err, xml)
			}
			ranks := gpuRanks(t, xml)
			var want []string
			byBus := map[string]string{}
			for _, d := range tc.devices {
				g := pub.Devices[d].GPU
				want = append(want, g.PCIBusID)
				byBus[g.PCIBusID] = tc.prefix + g.UUID
			}
			if got := slices.Sorted(slices.Values(ranks)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Fatalf("file's GPUs %v, want exactly the claim's %v", ranks, want)
			}
			var uuids []string
			for _, bus := range ranks {
				uuids = append(uuids, byBus[bus])
			}
			if got := envValue(oci, tc.visible); got != strings.Join(uuids, ",") {
				t.Errorf("%s = %q, want the file's rank order %q", tc.visible, got, strings.Join(uuids, ","))
			}
			if slices.Equal(ranks, want) {
				t.Errorf("rank order %v is the allocation's: the test shows nothing", ranks)
			}
			if hasEnv(oci, "CUDA_VISIBLE_DEVICES") && tc.visible != "CUDA_VISIBLE_DEVICES" {
				t.Errorf("CUDA_VISIBLE_DEVICES set on %s", tc.profile)
			}

			// A spec rewritten from the checkpoint (a reboot clears
			// /var/run/cdi) writes the file again.
			if err := os.RemoveAll(n.cdiDir()); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(n.cdiDir(), 0o755); err != nil {
				t.Fatal(err)
			}
			resolve(t, n.cdiDir(), containerIDs(t, n.prepare(c).Claims[c.Uid]))
			if again, err := os.ReadFile(m.Source); err != nil || string(again) != string(xml) {
				t.Fatalf("file after the spec was rewritten: %v, same %v", err, string(again) == string(xml))
			}

			if r := n.unprepare(c).Claims[c.Uid]; r.GetError() != "" {
				t.Fatalf("unprepare: %s", r.GetError())
			}
			if _, err := os.Stat(m.Source); !os.IsNotExist(err) {
				t.Errorf("file after unprepare: %v", err)
			}

			for _, other := range []*drapbv1.Claim{
				n.addClaim("plain", tc.devices...),
				n.addConfiguredClaim("single", ncclTopoConfig, tc.devices[0]),
			} {
				oci := resolve(t, n.cdiDir(), containerIDs(t, n.prepare(other).Claims[other.Uid]))
				if len(topoMount(oci)) != 0 || hasEnv(oci, "NCCL_TOPO_FILE") || hasEnv(oci, tc.visible) {
					t.Errorf("claim %s: mounts %+v env %q: want no topology file", other.Name, oci.Mounts, oci.Process.Env)
				}
				if r := n.unprepare(other).Claims[other.Uid]; r.GetError() != "" {
					t.Fatalf("unprepare %s: %s", other.Name, r.GetError())
				}
			}
			if es, _ := os.ReadDir(filepath.Dir(m.Source)); len(es) != 0 {
				t.Errorf("topology directory holds %d files after every unprepare", len(es))
			}
		})
	}
}

// TestNCCLTopoFileTwoClaims is what a container given two claims that
// each asked for the file gets, as the CDI library merges their specs: it
// applies the devices' edits in the order the runtime names them, a mount
// replacing any earlier mount at the same container path and a variable
// replacing the earlier value. No refusal: the claim named last wins the
// mount, NCCL_TOPO_FILE and CUDA_VISIBLE_DEVICES together, and the other
// claim's GPUs, though their device nodes are there, are hidden from CUDA.
// A claim without the file beside one with it is hidden the same way.
// docs/training.md says so and recommends one claim with all the GPUs.
func TestNCCLTopoFileTwoClaims(t *testing.T) {
	n := newNode(t, "dgx-h100")
	pub := n.driver.Published()
	a := n.addConfiguredClaim("a", ncclTopoConfig, "gpu-0", "gpu-1")
	b := n.addConfiguredClaim("b", ncclTopoConfig, "gpu-4", "gpu-5")
	plain := n.addClaim("plain", "gpu-6", "gpu-7")
	resp := n.prepare(a, b, plain)
	idsA, idsB, idsPlain := containerIDs(t, resp.Claims[a.Uid]), containerIDs(t, resp.Claims[b.Uid]), containerIDs(t, resp.Claims[plain.Uid])
	uuids := func(devs ...string) string {
		var out []string
		for _, d := range devs {
			out = append(out, pub.Devices[d].GPU.UUID)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name       string
		ids        []string
		winner     *drapbv1.Claim
		visible    string
		devicesGot int
	}{
		{"a then b", append(slices.Clone(idsA), idsB...), b, uuids("gpu-4", "gpu-5"), 4},
		{"b then a", append(slices.Clone(idsB), idsA...), a, uuids("gpu-0", "gpu-1"), 4},
		{"a then a claim without the file", append(slices.Clone(idsA), idsPlain...), a, uuids("gpu-0", "gpu-1"), 4},
		{"a claim without the file then a", append(slices.Clone(idsPlain), idsA...), a, uuids("gpu-0", "gpu-1"), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oci := resolve(t, n.cdiDir(), tc.ids)
			ms := topoMount(oci)
			want := filepath.Join(n.cdiDir(), "k8s.gpu.tessera.dev-nccl-topo", tc.winner.Uid+".xml")
			if len(ms) != 1 || ms[0].Source != want {
				t.Fatalf("mounts at %s: %+v, want one, of %s", nccltopo.ContainerPath, ms, want)
			}
			count := 0
			for _, e := range oci.Process.Env {
				if strings.HasPrefix(e, "NCCL_TOPO_FILE=") || strings.HasPrefix(e, "CUDA_VISIBLE_DEVICES=") {
					count++
				}
			}
			if count != 2 {
				t.Errorf("env %q: want NCCL_TOPO_FILE and CUDA_VISIBLE_DEVICES once each", oci.Process.Env)
			}
			if got := envValue(oci, "CUDA_VISIBLE_DEVICES"); got != tc.visible {
				t.Errorf("CUDA_VISIBLE_DEVICES = %q, want %q: the winner's GPUs only", got, tc.visible)
			}
			nvidia := 0
			for _, p := range devicePaths(oci) {
				if regexp.MustCompile(`^/dev/nvidia[0-9]+$`).MatchString(p) {
					nvidia++
				}
			}
			if nvidia != tc.devicesGot {
				t.Errorf("GPU device nodes %d, want %d: both claims' nodes are there", nvidia, tc.devicesGot)
			}
		})
	}
}
