package memlimit

import (
	"reflect"
	"strings"
	"testing"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		in, want int64
		err      bool
	}{
		{in: 7 << 30, want: 7 << 30},
		{in: 7<<30 + 1, want: 7 << 30},    // rounded down: never above the share
		{in: 1<<20 + 1023, want: 1 << 20}, // to the MiB
		{in: 1<<20 - 1, err: true},
		{in: 0, err: true},
	} {
		got, err := Bytes(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Bytes(%d) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestArgsRoundTrip: what the agent writes into a CDI spec is what the hook
// reads, for both mechanisms.
func TestArgsRoundTrip(t *testing.T) {
	h := Hook{Path: "/opt/tessera/bin/tessera-cdi-hook", CgroupRoot: "/sys/fs/cgroup", StateDir: DefaultStateDir}
	for _, l := range []Limit{
		{ClaimUID: "0b6f", Claim: "a/gpu", Device: "gpu-2", Mechanism: Dmem, Region: "drm/0000:03:00.0/vram0", Bytes: 8 << 30},
		{ClaimUID: "0b6f", Claim: "a/gpu", Device: "gpu-2", Mechanism: NVML, Region: region, GPU: "GPU-1234", Bytes: 7 << 30},
	} {
		args := h.LimitArgs(l)
		if args[0] != "tessera-cdi-hook" || args[1] != CmdLimit {
			t.Fatalf("args %q: want argv[0] the hook's name and the limit subcommand", args)
		}
		gh, gl, err := Parse(args[1], args[2:])
		if err != nil {
			t.Fatal(err)
		}
		gh.Path = h.Path
		if gh != h || gl != l {
			t.Errorf("round trip of %q: got %+v %+v, want %+v %+v", args, gh, gl, h, l)
		}
	}
	sim := Hook{Path: "/x/tessera-cdi-hook", CgroupRoot: "/var/run/tessera/n/cgroup", StateDir: "/var/run/tessera/n/limits", Simulated: true}
	args := sim.ReleaseArgs()
	gh, _, err := Parse(args[1], args[2:])
	if err != nil {
		t.Fatal(err)
	}
	gh.Path = sim.Path
	if !reflect.DeepEqual(gh, sim) {
		t.Errorf("release round trip: got %+v, want %+v", gh, sim)
	}
}

// TestParseErrors: every bad argument is named.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--claim-uid=a/b", "--device=gpu-0", "--mechanism=dmem", "--region=r", "--bytes=1048576"}, []string{"--claim-uid"}},
		{[]string{"--claim-uid=u", "--device=", "--mechanism=cgroupfs", "--region=r", "--bytes=1048576"}, []string{"--device", "--mechanism", "cgroupfs"}},
		{[]string{"--claim-uid=u", "--device=gpu-0", "--mechanism=nvml", "--region=r", "--bytes=1000"}, []string{"--gpu", "--bytes 1000"}},
		{[]string{"--claim-uid=u", "--device=gpu-0", "--mechanism=dmem", "--region=r", "--bytes=1048576", "--cgroup-root=sys/fs/cgroup"}, []string{"--cgroup-root"}},
		{[]string{"--nope"}, []string{"nope"}},
	} {
		_, _, err := Parse(CmdLimit, tc.args)
		if err == nil {
			t.Errorf("Parse(%q): no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q) = %v: want it to name %q", tc.args, err, w)
			}
		}
	}
}
