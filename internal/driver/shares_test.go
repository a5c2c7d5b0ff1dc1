package driver

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// TestShareCondition: True only for a limit the tenant cannot lift; the
// message says how the share is held and every reason it is not held by
// the kernel.
func TestShareCondition(t *testing.T) {
	sh := &sharing.Share{ID: "s1", MemoryBytes: 7 << 30, ComputeUnits: 29}
	for _, tc := range []struct {
		a      isolation.Assessment
		status metav1.ConditionStatus
		reason string
		says   []string
	}{
		{isolation.Assessment{Level: isolation.Kernel}, metav1.ConditionTrue, ReasonKernelMemoryLimit, []string{"at most 7168MiB"}},
		{isolation.Assessment{Level: isolation.Process, Blockers: []string{"driver 580.65.6 is older than 615.0.0", "no dmem"}}, metav1.ConditionFalse, ReasonProcessLimitsOnly,
			[]string{"at most 7168MiB", "their share of the compute units", "not an isolation boundary", "control pipe", "Not held by the kernel: driver 580.65.6 is older than 615.0.0; no dmem."}},
		{isolation.Assessment{Level: isolation.Process, MPSNamespace: true, Blockers: []string{"no dmem"}}, metav1.ConditionFalse, ReasonMPSNamespace,
			[]string{"MPS v3 namespace of its own", "at 7168MiB", "its share of the compute units", "not the daemon's control pipe", "Not a kernel limit", "Not held by the kernel: no dmem."}},
		{isolation.Assessment{Level: isolation.None, Blockers: []string{"no region"}}, metav1.ConditionFalse, ReasonSchedulingOnly,
			[]string{"accounting only", "Not held by the kernel: no region."}},
	} {
		st, r, msg := shareCondition(sh, tc.a)
		if st != tc.status || r != tc.reason {
			t.Errorf("%s: %s %s, want %s %s", tc.a.Level, st, r, tc.status, tc.reason)
		}
		for _, s := range tc.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: message %q does not say %q", tc.a.Level, msg, s)
			}
		}
	}
}

// TestLogUnshared: the devices --min-share-isolation keeps whole are
// logged with why; none is logged when every device is shared; a second
// build of the same devices logs nothing again.
func TestLogUnshared(t *testing.T) {
	for _, tc := range []struct {
		min  isolation.Level
		want int
	}{{isolation.None, 0}, {isolation.Process, 1}, {isolation.Kernel, 5}} {
		o := &Options{NodeName: "n", Sharing: publish.SharingCapacity, MinShareIsolation: tc.min, Host: isolation.Host{Root: "/sys/fs/cgroup", CgroupV2: true}}
		_, inv := alloctest.DiscoverSim(t, "mixed-inference", "n")
		res, err := publish.Build("n", inv, publishOptions(o, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
		d := &Driver{opts: *o}
		d.logUnshared(logger, res)
		d.logUnshared(logger, res)
		out := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
		if n := strings.Count(out, "Publishing a device whole"); n != tc.want {
			t.Errorf("min %s: %d devices logged, want %d:\n%s", tc.min, n, tc.want, out)
		}
	}
}

// TestLogUnsharedMemoryUnknown: a GPU whose memory the backend could not
// read is published whole under --sharing=capacity, said once, with the
// others shared.
func TestLogUnsharedMemoryUnknown(t *testing.T) {
	o := &Options{NodeName: "n", Sharing: publish.SharingCapacity, Host: isolation.Host{Root: "/sys/fs/cgroup", CgroupV2: true}}
	_, inv := alloctest.DiscoverSim(t, "mixed-inference", "n")
	inv.GPUs[0].MemoryBytes = 0
	res, err := publish.Build("n", inv, publishOptions(o, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	d := &Driver{opts: *o}
	d.logUnshared(logger, res)
	d.logUnshared(logger, res)
	out := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if n := strings.Count(out, "could not read its memory"); n != 1 {
		t.Errorf("%d lines on the GPU of unknown memory, want 1:\n%s", n, out)
	}
	shared := 0
	for _, e := range res.Devices {
		if e.Shared != nil {
			shared++
		}
	}
	if shared == 0 {
		t.Error("no device shared beside the GPU of unknown memory")
	}
}
