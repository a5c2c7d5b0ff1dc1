package sim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/host"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/sim/standin/standintest"
)

func TestBootIDPrecedence(t *testing.T) {
	hostID, err := host.BootID()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		file    string // "-": no boot_id file
		opts    []Option
		want    string
		wantErr string
	}{
		{name: "no file: the host's", file: "-", want: hostID},
		{name: "the file's over the host's", file: "sim-boot-1\n", want: "sim-boot-1"},
		{name: "the option's over the file's", file: "sim-boot-1", opts: []Option{WithBootID("opt-boot")}, want: "opt-boot"},
		{name: "empty file", file: " \n", wantErr: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.file != "-" {
				if err := os.WriteFile(filepath.Join(dir, BootIDFile), []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := New(mustProfile(t, "t4-2"), dir, append([]Option{testLogger(t)}, tt.opts...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.BootID() != tt.want {
				t.Errorf("BootID() = %q, want %q", b.BootID(), tt.want)
			}
			if data := string(mustRead(t, filepath.Join(dir, stateFileName))); !strings.Contains(data, `"bootID": "`+tt.want+`"`) {
				t.Errorf("state file does not record boot id %s:\n%s", tt.want, data)
			}
		})
	}
}

// TestReboot: what the node's hardware held goes with a Reboot, as the
// next backend on the directory finds: partitions, MIG mode and
// time-slice intervals are the machine file's again, the MPS daemons are
// dead and their directories gone.
func TestReboot(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	m := mustProfile(t, "dgx-h100")
	dir, root := t.TempDir(), filepath.Join(t.TempDir(), "mps")
	open := func() *Backend {
		b, err := New(m, dir, testLogger(t), WithMPS(root, standintest.Control(t)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	gpu := m.Node.GPUs[0].UUID
	if err := b.SetPartitionMode(ctx, gpu, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreatePartition(ctx, gpu, "1g.10gb", inventory.Placement{}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTimeSlice(ctx, m.Node.GPUs[1].UUID, backend.TimeSliceLong); err != nil {
		t.Fatal(err)
	}
	d, err := b.StartMPS(ctx, mps.DaemonSpec{ID: "claim-1", Devices: []string{gpu}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-d.PID, syscall.SIGKILL) })
	before := b.BootID()
	if again := open(); again.BootID() != before || len(again.node.GPUs[0].Partitions) != 1 {
		t.Fatalf("a restart without a reboot: boot id %s (was %s), partitions %+v", again.BootID(), before, again.node.GPUs[0].Partitions)
	}

	id, pids, err := Reboot(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	if id == "" || id == before || len(pids) != 1 || pids[0] != d.PID {
		t.Fatalf("Reboot = %q, %v; want a new boot id (was %s) and daemon %d killed", id, pids, before, d.PID)
	}
	if err := syscall.Kill(d.PID, 0); err == nil && !zombieOrGone(d.PID) {
		t.Errorf("MPS daemon %d survived the reboot", d.PID)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("MPS directory %s survived the reboot (%v)", root, err)
	}

	after := open()
	if after.BootID() != id {
		t.Errorf("after the reboot the backend's boot id is %s, want %s", after.BootID(), id)
	}
	g0, g1 := after.node.GPUs[0], after.node.GPUs[1]
	if len(g0.Partitions) != 0 || g0.Partitioning.Enabled || g1.TimeSlice != "" {
		t.Errorf("after the reboot: partitions %+v, MIG on %v, interval %q; want none, off, the default", g0.Partitions, g0.Partitioning.Enabled, g1.TimeSlice)
	}
	if ds, err := after.MPSDaemons(ctx); err != nil || len(ds) != 0 {
		t.Errorf("MPS daemons after the reboot: %+v, %v", ds, err)
	}
	if again, _, err := Reboot(dir, ""); err != nil || again == id {
		t.Errorf("second Reboot = %q, %v; want another new boot id", again, err)
	}
}

// zombieOrGone: pid has exited (a zombie waits for this test to reap it).
func zombieOrGone(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}
