package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/runtime-spec/specs-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
)

// resolve applies CDI device IDs to an empty OCI spec with the CDI library,
// as containerd or CRI-O would for a container.
func resolve(t *testing.T, specDir string, ids []string) *ocispec.Spec {
	t.Helper()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(specDir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("CDI cache: %v", err)
	}
	spec := &ocispec.Spec{Process: &ocispec.Process{}, Linux: &ocispec.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("inject %v (unresolved %v): %v", ids, unresolved, err)
	}
	return spec
}

func devicePaths(s *ocispec.Spec) []string {
	var out []string
	for _, d := range s.Linux.Devices {
		out = append(out, d.Path)
	}
	slices.Sort(out)
	return out
}

func envValue(s *ocispec.Spec, key string) string {
	for _, e := range s.Process.Env {
		if k, v, _ := strings.Cut(e, "="); k == key {
			return v
		}
	}
	return ""
}

func TestKubeletFlow(t *testing.T) {
	n := newNode(t, "mixed-inference")
	ctx := n.ctx

	info, err := n.registration().GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != names.DriverName {
		t.Fatalf("GetInfo = %+v", info)
	}

	// The node's slices reach the API server through the helper.
	waitFor(t, func() bool {
		l, err := n.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) > 0 && len(l.Items[0].Spec.Devices) == 5
	})

	res := n.driver.Published()
	var nv, amd []string
	for _, name := range res.Order {
		switch res.Devices[name].GPU.Vendor {
		case "nvidia":
			nv = append(nv, name)
		case "amd":
			amd = append(amd, name)
		}
	}
	good := n.addClaim("mixed", nv[0], amd[0])
	bad := n.addClaim("ghost", "gpu-99")
	resp := n.prepare(good, bad)

	if msg := resp.Claims[bad.Uid].GetError(); !strings.Contains(msg, "default/ghost") || !strings.Contains(msg, "gpu-99") {
		t.Errorf("bad claim error %q should name the claim and device", msg)
	}
	got := resp.Claims[good.Uid]
	if got.GetError() != "" || len(got.Devices) != 2 {
		t.Fatalf("good claim: %+v", got)
	}
	var ids []string
	for _, d := range got.Devices {
		ids = append(ids, d.CdiDeviceIds...)
	}
	spec := resolve(t, n.cdiDir(), ids)
	nvGPU, amdGPU := res.Devices[nv[0]].GPU, res.Devices[amd[0]].GPU
	wantPaths := []string{
		"/dev/dri/card" + itoa(amdGPU.Minor), "/dev/dri/renderD" + itoa(amdGPU.RenderMinor), "/dev/kfd",
		"/dev/nvidia" + itoa(nvGPU.Minor), "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl",
	}
	slices.Sort(wantPaths)
	if p := devicePaths(spec); !slices.Equal(p, wantPaths) {
		t.Errorf("container devices %v, want %v", p, wantPaths)
	}
	if v := envValue(spec, "NVIDIA_VISIBLE_DEVICES"); v != nvGPU.UUID {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%q, want %q", v, nvGPU.UUID)
	}
	for _, d := range spec.Linux.Devices {
		if d.Type != "c" || d.Major < 120 || d.Major > 127 {
			t.Errorf("simulated device %s is %s %d:%d, want a char device in the experimental range", d.Path, d.Type, d.Major, d.Minor)
		}
	}

	// Every host node the spec names exists in the simulated /dev tree, so a
	// real runtime could bind it.
	specs, _ := filepath.Glob(filepath.Join(n.cdiDir(), "*.json"))
	for _, f := range specs {
		s, err := cdi.ReadSpec(f, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range s.Devices {
			for _, dn := range d.ContainerEdits.DeviceNodes {
				if !strings.HasPrefix(dn.HostPath, n.backend.DevRoot()+"/") {
					t.Errorf("host path %s outside the sim /dev %s", dn.HostPath, n.backend.DevRoot())
				}
				if _, err := os.Lstat(dn.HostPath); err != nil {
					t.Errorf("host node of %s: %v", dn.Path, err)
				}
			}
		}
	}

	// Idempotent: the kubelet may ask again.
	again := n.prepare(good)
	if len(again.Claims[good.Uid].Devices) != 2 || again.Claims[good.Uid].GetError() != "" {
		t.Errorf("second prepare: %+v", again.Claims[good.Uid])
	}

	un := n.unprepare(good, bad)
	if e := un.Claims[good.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	entries, _ := os.ReadDir(n.cdiDir())
	if len(entries) != 0 {
		t.Errorf("CDI dir not empty after unprepare: %v", entries)
	}
}

func TestKubeletHealthStream(t *testing.T) {
	n := newNode(t, "t4-2")
	ctx, cancel := context.WithTimeout(n.ctx, 20*time.Second)
	defer cancel()
	stream, err := n.health().NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Devices) != 2 {
		t.Fatalf("initial report has %d devices, want 2", len(first.Devices))
	}
	for _, d := range first.Devices {
		if d.Health != drahealthv1.HealthStatus_HEALTHY || d.Device.PoolName != "node-1" {
			t.Errorf("device %+v", d)
		}
	}
	uuid := n.driver.Published().Devices["gpu-1"].GPU.UUID
	n.backend.InjectHealth(healthEvent(uuid))
	for {
		rep, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for unhealthy report: %v", err)
		}
		for _, d := range rep.Devices {
			if d.Device.DeviceName == "gpu-1" && d.Health == drahealthv1.HealthStatus_UNHEALTHY {
				return
			}
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func healthEvent(uuid string) backend.HealthEvent {
	return backend.HealthEvent{UUID: uuid, Kind: backend.HealthXID, Code: 79, Time: time.Now(), Message: "XID 79: GPU has fallen off the bus"}
}

func TestRestartKeepsClaimsPrepared(t *testing.T) {
	n := newNode(t, "dgx-h100")
	a := n.addClaim("a", "gpu-0", "gpu-1")
	first := n.prepare(a)
	if e := first.Claims[a.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	n.stop()
	n.start()
	again := n.prepare(a)
	if e := again.Claims[a.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	for i, d := range again.Claims[a.Uid].Devices {
		if !slices.Equal(d.CdiDeviceIds, first.Claims[a.Uid].Devices[i].CdiDeviceIds) {
			t.Errorf("device %d ids changed across restart: %v -> %v", i, first.Claims[a.Uid].Devices[i].CdiDeviceIds, d.CdiDeviceIds)
		}
	}
	b := n.addClaim("b", "gpu-2")
	if e := n.prepare(b).Claims[b.Uid].GetError(); e != "" {
		t.Fatalf("new claim after restart: %s", e)
	}
	thief := n.addClaim("thief", "gpu-1")
	// Refused as in use; the error reaches the thief's status and events,
	// so it names no other claim (the agent's log does).
	if e := n.prepare(thief).Claims[thief.Uid].GetError(); !strings.Contains(e, "in use by another prepared claim") || strings.Contains(e, "default/a") {
		t.Errorf("claim for a device held before the restart: error %q, want it refused as in use without naming default/a", e)
	}
}

// TestInventoryChangeRepublishes: a partition destroyed under the agent
// disappears from the published slices, and one carved appears.
func TestInventoryChangeRepublishes(t *testing.T) {
	n := newNode(t, "dgx-h100-mig")
	published := func() map[string]bool {
		out := map[string]bool{}
		l, err := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range l.Items {
			for _, d := range s.Spec.Devices {
				out[d.Name] = true
			}
		}
		return out
	}
	waitFor(t, func() bool { return published()["gpu-6-mig-1g-10gb-3"] })
	e := n.driver.Published().Devices["gpu-6-mig-1g-10gb-3"]
	if err := n.backend.DestroyPartition(n.ctx, e.GPU.UUID, e.Partition.UUID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !published()["gpu-6-mig-1g-10gb-3"] })
	if _, err := n.backend.CreatePartition(n.ctx, e.GPU.UUID, "1g.10gb", inventory.Placement{Start: 3, Size: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return published()["gpu-6-mig-1g-10gb-3"] })
}

// TestNotReadyUntilRegistered: publishing alone does not make the agent
// ready; the kubelet must have accepted its registration (the e2e suite
// checks the ready side against a real kubelet).
func TestNotReadyUntilRegistered(t *testing.T) {
	n := newNode(t, "t4-2")
	waitFor(t, func() bool {
		l, _ := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
		return l != nil && len(l.Items) > 0
	})
	if err := n.driver.Ready(n.ctx); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("Ready before the kubelet registered the plugin: %v", err)
	}
}
