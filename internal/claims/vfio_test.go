package claims

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// TestPassthroughPrepareUnprepare passes an H100 and an MI300X through and
// gives them back: the GPU moves to vfio-pci, its container gets the
// group's node and the VFIO container's (resolved by the CDI library) and
// none of its vendor's, the node stops publishing it while it keeps its
// name, and a second prepare answers from the checkpoint.
func TestPassthroughPrepareUnprepare(t *testing.T) {
	for _, tc := range []struct{ profile, device, host string }{
		{"dgx-h100", "gpu-3", "nvidia"},
		{"mi300x-8", "gpu-5", "amdgpu"},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			e := passthroughEnv(t, tc.profile)
			m, res := e.start(nil)
			ctx := ctxFor(t)
			gpu := res.Devices[tc.device].GPU
			claim := vfioClaim("vm", tc.device)
			devs, err := m.Prepare(ctx, claim)
			if err != nil {
				t.Fatal(err)
			}
			rec := m.Prepared()["uid-vm"].Devices[0]
			if err := e.driverIs(rec, "vfio-pci", true); err != nil {
				t.Fatal(err)
			}
			if !rec.VFIO.Bound || rec.VFIO.Functions[0] != (checkpoint.VFIOFunction{Address: gpu.PCIBusID, Driver: tc.host}) {
				t.Errorf("recorded %+v, want %s bound from %s", rec.VFIO, gpu.PCIBusID, tc.host)
			}
			spec := e.injected(devs[0].CDIDeviceIDs)
			var nodes []string
			for _, n := range spec.Linux.Devices {
				nodes = append(nodes, n.Path)
			}
			slices.Sort(nodes)
			if want := []string{"/dev/" + vfio.GroupNode(rec.VFIO.Group), "/dev/vfio/vfio"}; !slices.Equal(nodes, want) {
				t.Errorf("container nodes %v, want %v", nodes, want)
			}
			if len(spec.Process.Env) != 0 {
				t.Errorf("container environment %v, want none", spec.Process.Env)
			}
			if p := m.Passed(); len(p) != 1 || p[0].UUID != gpu.UUID {
				t.Errorf("Passed = %+v, want %s", p, gpu.UUID)
			}
			now := m.cfg.Devices()
			if _, ok := now.Devices[tc.device]; ok {
				t.Errorf("%s still published while passed", tc.device)
			}
			if p, ok := now.Passed[tc.device]; !ok || p.GPU.UUID != gpu.UUID {
				t.Errorf("%s not kept as passed: %+v", tc.device, now.Passed)
			}
			again, err := m.Prepare(ctx, claim)
			if err != nil || !slices.Equal(again[0].CDIDeviceIDs, devs[0].CDIDeviceIDs) {
				t.Fatalf("second prepare: %v, %v", again, err)
			}
			if err := m.Unprepare(ctx, "uid-vm", "default", "vm"); err != nil {
				t.Fatal(err)
			}
			e.onDrivers(t)
			if len(m.Passed()) != 0 || len(e.specFiles()) != 0 {
				t.Errorf("after unprepare: passed %v, specs %v", m.Passed(), e.specFiles())
			}
			if _, ok := m.cfg.Devices().Devices[tc.device]; !ok {
				t.Errorf("%s not published again", tc.device)
			}
		})
	}
}

// TestPassthroughRefusals: what cannot be passed is refused before
// anything is done, the error naming the claim, the device and why, and
// the node is left as it was.
func TestPassthroughRefusals(t *testing.T) {
	noIOMMU := filepath.Join(t.TempDir(), "no-iommu.yaml")
	if err := os.WriteFile(noIOMMU, []byte(`name: no-iommu
driverVersion: "580.65.06"
iommu: false
gpuTypes:
  l4: {vendor: nvidia, model: L4, productName: NVIDIA L4, architecture: ada, computeCapability: "8.9", memory: 23034Mi, computeUnits: 58}
gpus:
  - {type: l4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		env   func(t *testing.T) *env
		setup func(t *testing.T, e *env, res *publish.Result)
		claim *resourceapi.ResourceClaim
		want  []string
	}{
		{name: "passthrough off", env: func(t *testing.T) *env { return newEnv(t, "dgx-h100") }, claim: vfioClaim("vm", "gpu-1"),
			want: []string{"device gpu-1: passthrough is off on this node"}},
		{name: "no IOMMU", env: func(t *testing.T) *env { return passthroughEnv(t, noIOMMU) }, claim: vfioClaim("vm", "gpu-0"),
			want: []string{"gpu-0 (0000:10:00.0) cannot be passed through", "no IOMMU groups"}},
		{name: "incomplete group", env: func(t *testing.T) *env { return passthroughEnv(t, "mixed-inference") }, claim: vfioClaim("vm", "gpu-3"),
			want: []string{"gpu-3 (0000:98:00.0) cannot be passed through", "IOMMU group 52 is incomplete", "0000:99:00.0 (class 0x020000, mlx5_core)"}},
		{name: "a partition", env: func(t *testing.T) *env {
			e := passthroughEnv(t, "dgx-h100")
			e.partitioning = publish.Dynamic
			return e
		},
			claim: vfioClaim("vm", "gpu-7-mig-1g-10gb-6"), want: []string{"device gpu-7-mig-1g-10gb-6 is a partition"}},
		{name: "MIG instances on the GPU", env: func(t *testing.T) *env {
			e := passthroughEnv(t, "dgx-h100")
			e.partitioning = publish.Dynamic
			return e
		},
			setup: func(t *testing.T, e *env, res *publish.Result) {
				// Cut by hand after the agent started (an orphan the
				// start-up sweep did not see).
				gpu := res.Devices["gpu-7"].GPU.UUID
				if err := e.sim.SetPartitionMode(context.Background(), gpu, true); err != nil {
					t.Fatal(err)
				}
				if _, err := e.sim.CreatePartition(context.Background(), gpu, "1g.10gb", inventory.Placement{Start: 0}); err != nil {
					t.Fatal(err)
				}
			}, claim: vfioClaim("vm", "gpu-7"), want: []string{"device gpu-7: its GPU holds 1 partition(s) (MIG instances in use)"}},
		{name: "a capacity share", env: func(t *testing.T) *env { e := capacityEnv(t, "l4-4"); e.passthrough = true; return e },
			claim: asVFIO(shareClaim("vm", "gpu-0", "7Gi", 10)), want: []string{"device gpu-0 is a capacity share of its GPU"}},
		{name: "a sharing config", env: func(t *testing.T) *env { e := sharingEnv(t, "mixed-inference"); e.passthrough = true; return e },
			claim: asVFIO(configured("vm", longSlice, "gpu-2")), want: []string{"device gpu-2: its config asks sharing (TimeSlicing)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			m, res := e.start(nil)
			if tc.setup != nil {
				tc.setup(t, e, res)
			}
			_, err := m.Prepare(ctxFor(t), tc.claim)
			if !errors.Is(err, ErrPassthrough) {
				t.Fatalf("prepare: %v, want a passthrough refusal", err)
			}
			for _, w := range append([]string{"prepare claim default/vm (uid-vm)"}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			e.onDrivers(t)
			if len(m.Prepared()) != 0 || len(e.specFiles()) != 0 {
				t.Errorf("refused claim left entry %v, specs %v", m.Prepared(), e.specFiles())
			}
		})
	}
}

// asVFIO asks c's one request through the vfio class, keeping the rest.
func asVFIO(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "vfio.gpu.tessera.dev"}}}
	return c
}

// vfioPrepareSteps are the steps of a passthrough's prepare, and
// vfioUnprepareSteps of its unprepare, where a crash can stop it.
var (
	vfioPrepareSteps = []crashStep{stepPrepareStarted, crashStep(vfio.StepOverridden), crashStep(vfio.StepUnbound), crashStep(vfio.StepBound),
		stepSharingApplied, stepSpecWritten, stepPrepareCompleted}
	vfioUnprepareSteps = []crashStep{stepUnprepareStarted, stepSpecRemoved, crashStep(vfio.StepCleared), crashStep(vfio.StepReleased),
		crashStep(vfio.StepRestored), stepUnprepareFinished}
)

// TestPassthroughCrashAtEveryStep stops the agent at each step of a
// passthrough's prepare and unprepare and starts a new one on the node as
// it was left: a prepare stopped before PrepareCompleted is rolled back
// (the GPU on its driver, even stopped between unbind and bind), one
// stopped after it stays prepared (the GPU on vfio-pci); an unprepare is
// finished. The kubelet's retry then prepares or unprepares as asked.
func TestPassthroughCrashAtEveryStep(t *testing.T) {
	for _, step := range vfioPrepareSteps {
		t.Run("prepare/"+string(step), func(t *testing.T) {
			e := passthroughEnv(t, "dgx-h100")
			m, _ := e.start(crashAt(step))
			ctx := ctxFor(t)
			claim := vfioClaim("vm", "gpu-2")
			if _, err := m.Prepare(ctx, claim); !errors.Is(err, errInjected) {
				t.Fatalf("prepare: %v, want the injected stop", err)
			}
			m, _ = e.start(nil)
			e.assertConsistent(m, "uid-vm")
			if step == stepPrepareCompleted {
				if err := e.driverIs(m.Prepared()["uid-vm"].Devices[0], "vfio-pci", true); err != nil {
					t.Fatal(err)
				}
			} else {
				e.onDrivers(t)
			}
			if _, err := m.Prepare(ctx, claim); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if err := e.driverIs(m.Prepared()["uid-vm"].Devices[0], "vfio-pci", true); err != nil {
				t.Fatal(err)
			}
			if err := m.Unprepare(ctx, "uid-vm", "default", "vm"); err != nil {
				t.Fatal(err)
			}
			e.onDrivers(t)
		})
	}
	for _, step := range vfioUnprepareSteps {
		t.Run("unprepare/"+string(step), func(t *testing.T) {
			e := passthroughEnv(t, "dgx-h100")
			m, _ := e.start(nil)
			ctx := ctxFor(t)
			if _, err := m.Prepare(ctx, vfioClaim("vm", "gpu-2")); err != nil {
				t.Fatal(err)
			}
			m.crashHook = crashAt(step)
			if err := m.Unprepare(ctx, "uid-vm", "default", "vm"); !errors.Is(err, errInjected) {
				t.Fatalf("unprepare: %v, want the injected stop", err)
			}
			m, _ = e.start(nil)
			if err := m.Unprepare(ctx, "uid-vm", "default", "vm"); err != nil {
				t.Fatalf("kubelet's retried unprepare: %v", err)
			}
			e.onDrivers(t)
			if _, ok := m.Prepared()["uid-vm"]; ok || len(e.specFiles()) != 0 {
				t.Errorf("after the retry: entry %v, specs %v", m.Prepared()["uid-vm"], e.specFiles())
			}
		})
	}
}

// TestPassthroughReboot: a reboot gives every GPU back to its driver and
// leaves no binding recorded: the claim, still prepared in the checkpoint,
// is passed again when the kubelet prepares it, and given back at its
// unprepare; one unprepared without being prepared again has nothing to
// give back.
func TestPassthroughReboot(t *testing.T) {
	for _, again := range []bool{true, false} {
		t.Run(map[bool]string{true: "prepared again", false: "unprepared"}[again], func(t *testing.T) {
			e := passthroughEnv(t, "hgx-h200")
			m, _ := e.start(nil)
			ctx := ctxFor(t)
			claim := vfioClaim("vm", "gpu-4")
			if _, err := m.Prepare(ctx, claim); err != nil {
				t.Fatal(err)
			}
			e.bootID = "boot-2"
			m, _ = e.start(nil)
			e.onDrivers(t)
			if rec := m.Prepared()["uid-vm"].Devices[0].VFIO; rec == nil || rec.Bound {
				t.Fatalf("after the reboot the record says %+v, want it unbound", rec)
			}
			if p := m.Passed(); len(p) != 0 {
				t.Errorf("Passed after the reboot: %+v", p)
			}
			if again {
				if _, err := m.Prepare(ctx, claim); err != nil {
					t.Fatal(err)
				}
				if err := e.driverIs(m.Prepared()["uid-vm"].Devices[0], "vfio-pci", true); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Unprepare(ctx, "uid-vm", "default", "vm"); err != nil {
				t.Fatal(err)
			}
			e.onDrivers(t)
		})
	}
}

// TestPassthroughLostRecord: a passthrough cut short between unbind and
// bind whose checkpoint and spec are both lost leaves a GPU on no driver
// with vfio-pci as its override: the next agent's start gives it back. A
// GPU vfio-pci holds that no claim records is someone else's and stays.
func TestPassthroughLostRecord(t *testing.T) {
	e := passthroughEnv(t, "dgx-h100")
	m, res := e.start(crashAt(crashStep(vfio.StepUnbound)))
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, vfioClaim("vm", "gpu-2")); !errors.Is(err, errInjected) {
		t.Fatalf("prepare: %v, want the injected stop", err)
	}
	if d := e.gpuDriver(res, "gpu-2"); d != "" {
		t.Fatalf("stopped between unbind and bind: GPU on %q, want no driver", d)
	}
	operators := res.Devices["gpu-5"].GPU.PCIBusID
	if err := vfio.Bind(e.sim.PCISysfs(), operators, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{e.checkpointPath(), e.checkpointPath() + ".1", e.checkpointPath() + ".log"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	e.start(nil)
	if d := e.gpuDriver(res, "gpu-2"); d != "nvidia" {
		t.Errorf("after the start: the cut-short GPU on %q, want nvidia", d)
	}
	if d := e.gpuDriver(res, "gpu-5"); d != "vfio-pci" {
		t.Errorf("after the start: the operator's GPU on %q, want vfio-pci (left as it is)", d)
	}
}

// TestPassthroughEnsure: a passed GPU given back by hand is bound again
// when the kubelet prepares its claim again: its spec names the group's
// node.
func TestPassthroughEnsure(t *testing.T) {
	e := passthroughEnv(t, "dgx-h100")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	claim := vfioClaim("vm", "gpu-6")
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := vfio.Restore(e.sim.PCISysfs(), res.Devices["gpu-6"].GPU.PCIBusID, "nvidia", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := e.driverIs(m.Prepared()["uid-vm"].Devices[0], "vfio-pci", true); err != nil {
		t.Fatal(err)
	}
}

// TestPassthroughBesideMIG: on a dynamic node a GPU is passed through
// while another carves MIG slices; each claim keeps to its GPU.
func TestPassthroughBesideMIG(t *testing.T) {
	e := passthroughEnv(t, "dgx-h100")
	e.partitioning = publish.Dynamic
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("mig", "gpu-7-mig-1g-10gb-6")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prepare(ctx, vfioClaim("vm", "gpu-0")); err != nil {
		t.Fatal(err)
	}
	if err := e.driverIs(m.Prepared()["uid-vm"].Devices[0], "vfio-pci", true); err != nil {
		t.Fatal(err)
	}
	if n := e.totalPartitions(); n != 1 {
		t.Errorf("%d partitions, want the MIG claim's", n)
	}
	if _, err := m.Prepare(ctx, vfioClaim("vm2", "gpu-7")); !errors.Is(err, ErrDeviceInUse) {
		t.Errorf("passing the GPU the MIG claim holds a slice of: %v, want it refused as in use", err)
	}
}
