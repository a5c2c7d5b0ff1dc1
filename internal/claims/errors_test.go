package claims

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var kinds = []error{ErrNotAllocated, ErrDeviceNotOnNode, ErrDeviceInUse, ErrConfigRejected, ErrCDI, ErrCheckpoint, ErrPartition}

// assertKind checks that err is of kind want and of no other kind, with the
// message unchanged by the marking.
func assertKind(t *testing.T, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	for _, k := range kinds {
		if got := errors.Is(err, k); got != (k == want) {
			t.Errorf("errors.Is(%q, %v) = %v", err, k, got)
		}
	}
}

func TestPrepareErrorKinds(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("holder", "gpu-3")); err != nil {
		t.Fatal(err)
	}
	unallocated := allocated("pending")
	unallocated.Status.Allocation = nil
	withConfig := allocated("configured", "gpu-5")
	withConfig.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(`{}`)}}},
	}}
	for _, tc := range []struct {
		claim *resourceapi.ResourceClaim
		kind  error
	}{
		{unallocated, ErrNotAllocated},
		{allocated("ghost", "gpu-42"), ErrDeviceNotOnNode},
		{allocated("thief", "gpu-3"), ErrDeviceInUse},
		{withConfig, ErrConfigRejected},
	} {
		t.Run(tc.claim.Name, func(t *testing.T) {
			_, err := m.Prepare(ctx, tc.claim)
			assertKind(t, err, tc.kind)
		})
	}

	t.Run("cdi", func(t *testing.T) {
		// A file where the spec directory should be: the spec cannot be written.
		moveAside(t, e.cdiDir())
		_, err := m.Prepare(ctx, allocated("nospec", "gpu-6"))
		assertKind(t, err, ErrCDI)
	})
	t.Run("checkpoint", func(t *testing.T) {
		moveAside(t, filepath.Dir(e.checkpointPath()))
		_, err := m.Prepare(ctx, allocated("nosave", "gpu-7"))
		assertKind(t, err, ErrCheckpoint)
		err = m.Unprepare(ctx, "uid-holder", "default", "holder")
		assertKind(t, err, ErrCheckpoint)
	})
}

// moveAside replaces dir by a regular file for the rest of the test, which
// fails writes into it even as root.
func moveAside(t *testing.T, dir string) {
	t.Helper()
	if err := os.Rename(dir, dir+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(dir)
		os.Rename(dir+".aside", dir)
	})
}

// TestPlainSaveFailure: when the checkpoint cannot be saved, a plain
// prepare leaves no trace and a plain unprepare keeps the claim recorded,
// so memory never claims what disk does not; once the disk is back the
// kubelet's retries finish and a restart agrees.
func TestPlainSaveFailure(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("holder", "gpu-1")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(e.checkpointPath())
	if err := os.Rename(dir, dir+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prepare(ctx, allocated("nosave", "gpu-2")); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("prepare: %v", err)
	}
	if _, ok := m.Prepared()["uid-nosave"]; ok || e.hasSpec("uid-nosave") {
		t.Fatal("failed prepare left its entry or spec")
	}
	if err := m.Unprepare(ctx, "uid-holder", "default", "holder"); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("unprepare: %v", err)
	}
	if _, ok := m.Prepared()["uid-holder"]; !ok {
		t.Fatal("failed unprepare dropped the claim from memory while disk still has it")
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".aside", dir); err != nil {
		t.Fatal(err)
	}
	// gpu-2 is free again: the failed claim reserved nothing.
	if _, err := m.Prepare(ctx, allocated("other", "gpu-2")); err != nil {
		t.Fatal(err)
	}
	if err := m.Unprepare(ctx, "uid-holder", "default", "holder"); err != nil {
		t.Fatal(err)
	}
	m2, _ := e.start(nil)
	got := m2.Prepared()
	if _, ok := got["uid-holder"]; ok || len(got) != 1 {
		t.Fatalf("after restart: %v", got)
	}
}
