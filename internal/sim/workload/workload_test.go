package workload

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	m, err := sim.Profile("dgx-h100-mig", "n1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.New(m, dir, sim.WithBootID("b"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names, err := publish.GPUNames(&inventory.Node{GPUs: n.GPUs})
	if err != nil {
		t.Fatal(err)
	}
	var gpu0 string
	var part inventory.Partition
	var partName string
	for _, g := range n.GPUs {
		if names[g.UUID] == "gpu-0" {
			gpu0 = g.UUID
		}
		if len(g.Partitions) > 0 && partName == "" {
			part, partName = g.Partitions[0], publish.PartitionName(names[g.UUID], g.Partitions[0])
		}
	}
	tests := []struct {
		args []string
		code int
		out  string
		// uuid's utilization and used memory after the call
		uuid       string
		util, used float64
	}{
		{args: []string{"--device=gpu-0", "--util=70", "--memory=30Gi"}, out: "gpu-0 (" + gpu0 + ") runs at 70% with 30Gi of memory", uuid: gpu0, util: 70, used: 30 << 30},
		{args: []string{"--device=" + gpu0, "--util=20"}, out: "runs at 20%", uuid: gpu0, util: 20},
		{args: []string{"--device=" + partName, "--util=50", "--memory=1Gi"}, out: partName + " (" + part.UUID + ") runs at 50%", uuid: part.UUID, util: 50, used: 1 << 30},
		{args: []string{"--device=gpu-0", "--clear"}, out: "gpu-0 (" + gpu0 + ") is idle", uuid: gpu0},
		{args: []string{"--device=" + part.UUID, "--util=101"}, code: 2, out: "utilization 101% is not within 0..100", uuid: part.UUID, util: 50, used: 1 << 30},
		{args: []string{"--device=gpu-0", "--memory=lots"}, code: 2, out: `--memory: "lots" is not a quantity`, uuid: gpu0},
		{args: []string{"--device=gpu-0", "--clear", "--util=3"}, code: 2, out: "--clear takes no --util or --memory", uuid: gpu0},
		{args: []string{"--device=gpu-9", "--util=3"}, code: 1, out: `no device "gpu-9" on this node; its GPUs are gpu-0, gpu-1`, uuid: gpu0},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		if code := Main(append([]string{"--state-dir=" + dir}, tc.args...), &out, &errb); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s%s)", tc.args, code, tc.code, out.String(), errb.String())
		}
		if got := out.String() + errb.String(); !strings.Contains(got, tc.out) {
			t.Errorf("%v: output %q lacks %q", tc.args, got, tc.out)
		}
		samples, err := b.ReadTelemetry(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			if s.UUID != tc.uuid {
				continue
			}
			util, _ := s.Get(telemetry.UtilizationPercent)
			used, _ := s.Get(telemetry.MemoryUsedBytes)
			if s.UUID == gpu0 && (util != tc.util || used != tc.used) || s.UUID == part.UUID && (util != tc.util || used != tc.used) {
				t.Errorf("%v: %s at %v%% with %v bytes, want %v%% with %v", tc.args, s.UUID, util, used, tc.util, tc.used)
			}
		}
	}
}

func TestLoadNeedsStateDirAndDevice(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--util=3"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--state-dir and --device are required") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
	if code := Main([]string{"--state-dir=" + t.TempDir(), "--device=gpu-0"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "has an agent run with --sim-state-dir") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
}
