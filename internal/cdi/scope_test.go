package cdi

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// forContainer is the CDI IDs the kubelet hands a container: the IDs of
// the devices of the request it names, in order, or of every device and
// then the whole-claim entry when it names the claim (request "").
func forContainer(devs []ClaimDevice, ids [][]string, whole []string, request string) []string {
	var out []string
	for i, d := range devs {
		if request == "" || d.Request == request {
			out = append(out, ids[i]...)
		}
	}
	if request == "" {
		out = append(out, whole...)
	}
	return out
}

// A claim split between containers by request (a pod-group claim with one
// request per worker, or a pod whose containers name one request each):
// each container's variables name its own GPUs only, resolved by the real
// CDI library; a container naming the whole claim gets them all.
func TestRequestScopedEnv(t *testing.T) {
	mps := func(d ClaimDevice) ClaimDevice {
		d.Sharing = &sharing.Settings{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: 4 << 30}
		d.MPSPipeDir = "/run/tessera/mps/uid-a"
		return d
	}
	withRequest := func(d ClaimDevice, r string) ClaimDevice { d.Request = r; return d }
	uuid := func(i int) string { return nvidiaGPU(i).UUID }
	tests := []struct {
		name string
		devs []ClaimDevice
		// want is each container's variables, by the request it names.
		want map[string][]string
	}{
		{
			name: "one request per worker",
			devs: []ClaimDevice{withRequest(dev(0, nvidiaGPU(0), nil), "worker-0"), withRequest(dev(1, nvidiaGPU(1), nil), "worker-1"), withRequest(dev(2, nvidiaGPU(2), nil), "worker-2")},
			want: map[string][]string{
				"worker-0": {"NVIDIA_VISIBLE_DEVICES=" + uuid(0)},
				"worker-1": {"NVIDIA_VISIBLE_DEVICES=" + uuid(1)},
				"worker-2": {"NVIDIA_VISIBLE_DEVICES=" + uuid(2)},
				"":         {"NVIDIA_VISIBLE_DEVICES=" + uuid(0) + "," + uuid(1) + "," + uuid(2)},
			},
		},
		{
			name: "two GPUs and a MIG slice",
			devs: []ClaimDevice{withRequest(dev(0, nvidiaGPU(0), nil), "pair"), withRequest(dev(1, nvidiaGPU(1), nil), "pair"), withRequest(dev(2, nvidiaGPU(2), migPartition(3, 0)), "slice")},
			want: map[string][]string{
				"pair":  {"NVIDIA_VISIBLE_DEVICES=" + uuid(0) + "," + uuid(1)},
				"slice": {"NVIDIA_VISIBLE_DEVICES=" + migPartition(3, 0).UUID},
				"":      {"NVIDIA_VISIBLE_DEVICES=" + uuid(0) + "," + uuid(1) + "," + migPartition(3, 0).UUID},
			},
		},
		{
			// MPS ordinals (the pinned limit's "0=") count the container's
			// own CUDA_VISIBLE_DEVICES.
			name: "MPS per worker",
			devs: []ClaimDevice{mps(withRequest(dev(0, nvidiaGPU(0), nil), "a")), mps(withRequest(dev(1, nvidiaGPU(1), nil), "b"))},
			want: map[string][]string{
				"a": {"NVIDIA_VISIBLE_DEVICES=" + uuid(0), "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_VISIBLE_DEVICES=" + uuid(0), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M"},
				"b": {"NVIDIA_VISIBLE_DEVICES=" + uuid(1), "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_VISIBLE_DEVICES=" + uuid(1), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M"},
				"":  {"NVIDIA_VISIBLE_DEVICES=" + uuid(0) + "," + uuid(1), "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_VISIBLE_DEVICES=" + uuid(0) + "," + uuid(1), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M,1=4096M"},
			},
		},
		{
			// One request: the spec of before, and no whole-claim entry.
			name: "one request",
			devs: []ClaimDevice{dev(0, nvidiaGPU(0), nil), dev(1, nvidiaGPU(1), nil)},
			want: map[string][]string{
				"gpus": {"NVIDIA_VISIBLE_DEVICES=" + uuid(0) + "," + uuid(1)},
				"":     {"NVIDIA_VISIBLE_DEVICES=" + uuid(0) + "," + uuid(1)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, dir := newTestWriter(t, simNumbers)
			ids, err := writeSpec(w, ClaimRef{UID: uidA, Namespace: "ns", Name: "claim"}, tt.devs)
			if err != nil {
				t.Fatal(err)
			}
			whole := WholeClaimIDs(uidA, ids)
			if multi := len(tt.want) > 2; multi != (whole != nil) {
				t.Errorf("WholeClaimIDs = %q; want them only for a claim of several requests", whole)
			}
			for req, want := range tt.want {
				spec, err := inject(t, dir, forContainer(tt.devs, ids, whole, req)...)
				if err != nil {
					t.Fatalf("request %q: InjectDevices: %v", req, err)
				}
				got := slices.Clone(envOf(spec))
				slices.Sort(got)
				want = slices.Clone(want)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("container naming %q: env\n got %q\nwant %q", req, got, want)
				}
				// Its device nodes are its devices' only.
				for i, d := range tt.devs {
					mine := req == "" || d.Request == req
					has := slices.ContainsFunc(devicesOf(t, spec), func(n node) bool { return n.Path == "/dev/nvidia"+strings.TrimPrefix(d.Device, "gpu-") })
					if d.Partition == nil && mine != has {
						t.Errorf("container naming %q: device %d node present=%v, want %v", req, i, has, mine)
					}
				}
			}
		})
	}
}

func TestWholeClaimIDs(t *testing.T) {
	q := func(n string) string { return Kind + "=" + n }
	tests := []struct {
		name string
		ids  [][]string
		want []string
	}{
		{"one request", [][]string{{q("u-0-gpu-0"), q("u-common-nvidia")}, {q("u-1-gpu-1"), q("u-common-nvidia")}}, nil},
		{"per request", [][]string{
			{q("u-0-gpu-0"), q("u-common-nvidia-r0"), "nvidia.com/gpu=GPU-0", q("u-mps-r0")},
			{q("u-1-gpu-1"), q("u-common-nvidia-r1"), q("u-nccl-r1")},
			{q("u-2-gpu-2"), q("u-common-amd-r2")},
		}, []string{q("u-common-nvidia"), q("u-mps"), q("u-nccl"), q("u-common-amd")}},
		// A device named like a claim-level one with a suffix is still a
		// device: its name starts with its index.
		{"device names", [][]string{{q("u-0-r1"), q("u-common-nvidia")}}, nil},
		{"another claim's IDs", [][]string{{q("v-common-nvidia-r0")}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WholeClaimIDs("u", tt.ids); !slices.Equal(got, tt.want) {
				t.Errorf("WholeClaimIDs = %q, want %q", got, tt.want)
			}
		})
	}
}
