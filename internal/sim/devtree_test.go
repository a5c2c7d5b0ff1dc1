package sim

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

func TestDeviceTreeNVIDIA(t *testing.T) {
	ctx := context.Background()
	b, dir := newBackend(t, mustProfile(t, "dgx-h100-mig"))
	if b.DevRoot() != filepath.Join(dir, "dev") {
		t.Errorf("DevRoot() = %s", b.DevRoot())
	}
	want := map[string][2]int64{
		"nvidiactl": {120, 255}, "nvidia-uvm": {121, 0}, "nvidia-uvm-tools": {121, 1},
		"nvidia-caps/nvidia-cap1": {122, 1}, "nvidia-caps/nvidia-cap2": {122, 2},
	}
	for i := 0; i < 8; i++ {
		want["nvidia"+strconv.Itoa(i)] = [2]int64{120, int64(i)}
	}
	// GPU 6 (minor 6): seven 1g.10gb, GI ids 7-13, CI 0.
	for gi := 7; gi <= 13; gi++ {
		g, c := migCaps(6, gi, 0)
		want[capPath(g)], want[capPath(c)] = [2]int64{122, int64(g)}, [2]int64{122, int64(c)}
	}
	for p, nums := range want {
		assertNode(t, b, p, nums[0], nums[1])
	}
	if _, _, ok := b.DeviceNumbers("kfd"); ok {
		t.Error("an NVIDIA machine has /dev/kfd")
	}
	if maj, min, ok := b.DeviceNumbers("/dev/nvidia3"); !ok || maj != 120 || min != 3 {
		t.Errorf("/dev/nvidia3: %d %d %v", maj, min, ok)
	}
	for _, p := range []string{"nvidia8", "nvidia-caps/nvidia-cap3", "dri/card0", "../etc/passwd"} {
		if _, _, ok := b.DeviceNumbers(p); ok {
			t.Errorf("DeviceNumbers(%q) claims a node the machine lacks", p)
		}
	}

	// Cap nodes come and go with their partition.
	gpu := b.machine.Node.GPUs[7].UUID
	old := b.machine.Node.GPUs[7].Partitions[0] // 1g.10gb at 0, GI 7
	if err := b.DestroyPartition(ctx, gpu, old.UUID); err != nil {
		t.Fatal(err)
	}
	giNode, ciNode := migCaps(7, 7, 0)
	for _, n := range []int{giNode, ciNode} {
		if _, err := os.Lstat(filepath.Join(b.DevRoot(), capPath(n))); !os.IsNotExist(err) {
			t.Errorf("cap node %d survives its partition: %v", n, err)
		}
		if _, _, ok := b.DeviceNumbers(capPath(n)); ok {
			t.Errorf("DeviceNumbers knows destroyed cap %d", n)
		}
	}
	p, err := b.CreatePartition(ctx, gpu, "1g.10gb", inventory.Placement{Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	g, c := migCaps(7, p.GPUInstanceID, 0)
	assertNode(t, b, capPath(g), 122, int64(g))
	assertNode(t, b, capPath(c), 122, int64(c))
}

func TestDeviceTreeAMD(t *testing.T) {
	b, _ := newBackend(t, enableAll(mustProfile(t, "mi300x-8")))
	assertNode(t, b, "kfd", 124, 0)
	for i := 0; i < 8; i++ {
		assertNode(t, b, "dri/card"+strconv.Itoa(i+1), 123, int64(i+1))
		assertNode(t, b, "dri/renderD"+strconv.Itoa(128+i), 123, int64(128+i))
	}
	if _, _, ok := b.DeviceNumbers("nvidiactl"); ok {
		t.Error("an AMD machine has nvidiactl")
	}
	p, err := b.CreatePartition(context.Background(), b.machine.Node.GPUs[0].UUID, "QPX", inventory.Placement{Start: 2})
	if err != nil {
		t.Fatal(err)
	}
	assertNode(t, b, "dri/card"+strconv.Itoa(p.Minor), 123, int64(p.Minor))
	assertNode(t, b, "dri/renderD"+strconv.Itoa(p.RenderMinor), 123, int64(p.RenderMinor))
}

// TestDeviceTreeWithoutMknod: where mknod is refused, empty files stand in
// and DeviceNumbers still answers.
func TestDeviceTreeWithoutMknod(t *testing.T) {
	saved := mknod
	mknod = func(string, uint32, int) error { return unix.EPERM }
	t.Cleanup(func() { mknod = saved })
	b, _ := newBackend(t, mustProfile(t, "t4-2"))
	fi, err := os.Lstat(filepath.Join(b.DevRoot(), "nvidia1"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("stand-in: %v %v", fi, err)
	}
	if maj, min, ok := b.DeviceNumbers("nvidia1"); !ok || maj != 120 || min != 1 {
		t.Errorf("DeviceNumbers without nodes: %d %d %v", maj, min, ok)
	}
}

// migCaps is nvidia.MIGCapMinors for IDs known to be in range.
func migCaps(gpuMinor, gi, ci int) (giAccess, ciAccess int) {
	giAccess, ciAccess, err := nvidia.MIGCapMinors(gpuMinor, gi, ci)
	if err != nil {
		panic(err)
	}
	return giAccess, ciAccess
}

func capPath(n int) string { return "nvidia-caps/nvidia-cap" + strconv.Itoa(n) }

// assertNode checks a node exists in the tree (a real character device
// where mknod worked) and that DeviceNumbers gives its numbers.
func assertNode(t *testing.T, b *Backend, path string, major, minor int64) {
	t.Helper()
	full := filepath.Join(b.DevRoot(), path)
	fi, err := os.Lstat(full)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if fi.Mode()&os.ModeCharDevice != 0 {
		var st unix.Stat_t
		if err := unix.Lstat(full, &st); err != nil {
			t.Fatal(err)
		}
		if int64(unix.Major(st.Rdev)) != major || int64(unix.Minor(st.Rdev)) != minor {
			t.Errorf("%s is %d:%d, want %d:%d", path, unix.Major(st.Rdev), unix.Minor(st.Rdev), major, minor)
		}
	} else if !fi.Mode().IsRegular() {
		t.Errorf("%s is neither a device nor a stand-in file: %v", path, fi.Mode())
	}
	maj, min, ok := b.DeviceNumbers(path)
	if !ok || maj != major || min != minor {
		t.Errorf("DeviceNumbers(%q) = %d, %d, %v; want %d, %d", path, maj, min, ok, major, minor)
	}
}

func TestDevRootIsAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	b, err := New(mustProfile(t, "t4-2"), "relative-state", WithBootID("b"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(b.DevRoot()) {
		t.Errorf("DevRoot() = %s, want an absolute path", b.DevRoot())
	}
}
