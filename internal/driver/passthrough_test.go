package driver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// TestPassthroughThroughTheKubelet passes an H100 through over the agent's
// real socket: the node publishes iommuGroup on every GPU that can be
// passed, stops publishing the passed one (the others keep their names)
// and tells the kubelet's health stream and the metrics why it has no
// health or readings, and publishes it again once given back.
func TestPassthroughThroughTheKubelet(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", passthrough: true})
	before := n.driver.Published()
	for _, name := range []string{"gpu-0", "gpu-3", "gpu-7"} {
		if _, ok := before.Devices[name].Attributes[publish.AttrIOMMUGroup]; !ok {
			t.Errorf("%s published without iommuGroup", name)
		}
	}
	uuids := map[string]string{}
	for name, e := range before.Devices {
		uuids[name] = e.GPU.UUID
	}
	claim := n.addClassClaim("vm", names.VFIOClass, "", "gpu-3")
	resp := n.prepare(claim)
	if msg := resp.Claims[claim.Uid].GetError(); msg != "" {
		t.Fatalf("prepare: %s", msg)
	}
	if d := n.gpuDriver(before, "gpu-3"); d != vfio.Driver {
		t.Fatalf("gpu-3 on %q after prepare, want %s", d, vfio.Driver)
	}
	now := n.driver.Published()
	if _, ok := now.Devices["gpu-3"]; ok {
		t.Error("gpu-3 still published while passed through")
	}
	for name, e := range now.Devices {
		if uuids[name] != e.GPU.UUID {
			t.Errorf("%s is now GPU %s, was %s: a passed GPU renamed the others", name, e.GPU.UUID, uuids[name])
		}
	}
	rep, _ := n.driver.health.report()
	i := slices.IndexFunc(rep.Devices, func(h kubeletplugin.DeviceHealth) bool { return h.DeviceName == "gpu-3" })
	if i < 0 || rep.Devices[i].Health != kubeletplugin.HealthStatusUnknown || !strings.Contains(rep.Devices[i].Message, "passed through") {
		t.Errorf("health of the passed GPU: %+v", rep.Devices)
	}
	samples, err := n.backend.ReadTelemetry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var passed []string
	for _, d := range n.driver.Telemetry(samples, nil) {
		if d.PassedThrough {
			passed = append(passed, d.Device)
			if !d.Sample.Empty() {
				t.Errorf("the passed GPU reports readings %+v", d.Sample)
			}
		} else if d.Device == "gpu-3" {
			t.Error("gpu-3 reported with readings while passed")
		}
	}
	if !slices.Equal(passed, []string{"gpu-3"}) {
		t.Errorf("telemetry says %v passed through, want gpu-3", passed)
	}

	if msg := n.unprepare(claim).Claims[claim.Uid].GetError(); msg != "" {
		t.Fatalf("unprepare: %s", msg)
	}
	if d := n.gpuDriver(before, "gpu-3"); d != "nvidia" {
		t.Errorf("gpu-3 on %q after unprepare, want nvidia", d)
	}
	if e, ok := n.driver.Published().Devices["gpu-3"]; !ok || e.GPU.UUID != uuids["gpu-3"] {
		t.Errorf("gpu-3 not published again after unprepare: %+v", e)
	}
}

// TestPassthroughOffRefuses: an agent without --passthrough publishes no
// iommuGroup (the class selects nothing there) and refuses a claim of the
// class naming the flag.
func TestPassthroughOffRefuses(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100"})
	for name, e := range n.driver.Published().Devices {
		if _, ok := e.Attributes[publish.AttrIOMMUGroup]; ok {
			t.Errorf("%s published with iommuGroup on a node without passthrough", name)
		}
	}
	claim := n.addClassClaim("vm", names.VFIOClass, "", "gpu-1")
	msg := n.prepare(claim).Claims[claim.Uid].GetError()
	if !strings.Contains(msg, "passthrough is off on this node") {
		t.Errorf("prepare: %q, want a refusal naming --passthrough", msg)
	}
}

// TestPassthroughCutShortPublishedAgain: a GPU a passthrough cut short
// left on no driver while the agent was down, its record lost, is given
// back by the next agent's start-up sweep and is among the devices that
// agent publishes first (its first build must follow the sweep, which
// runs after the claim manager first discovered the node).
func TestPassthroughCutShortPublishedAgain(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", passthrough: true})
	before := n.driver.Published()
	addr := before.Devices["gpu-6"].GPU.PCIBusID
	uuid := before.Devices["gpu-6"].GPU.UUID
	n.stop()
	stop := errors.New("agent killed")
	if err := vfio.Bind(n.backend.PCISysfs(), addr, func(st vfio.Step) error {
		if st == vfio.StepUnbound {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("cut a passthrough of %s short: %v", addr, err)
	}
	if d := n.gpuDriver(before, "gpu-6"); d != "" {
		t.Fatalf("%s on %q after the cut, want no driver", addr, d)
	}
	n.start()
	if d := n.gpuDriver(before, "gpu-6"); d != "nvidia" {
		t.Errorf("%s on %q after the restart, want nvidia", addr, d)
	}
	got := n.driver.Published()
	if e, ok := got.Devices["gpu-6"]; !ok || e.GPU.UUID != uuid {
		t.Errorf("first publish after the restart: gpu-6 is %+v, want GPU %s (%d devices)", e.GPU, uuid, len(got.Devices))
	}
}

func (n *node) gpuDriver(res *publish.Result, device string) string {
	n.t.Helper()
	d, err := vfio.DriverOf(n.backend.PCISysfs(), res.Devices[device].GPU.PCIBusID)
	if err != nil {
		n.t.Fatal(err)
	}
	return d
}
