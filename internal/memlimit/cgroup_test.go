package memlimit

import (
	"testing"
)

func TestProcCgroup(t *testing.T) {
	const v2 = "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope\n"
	const v1 = "12:pids:/kubepods/pod1/abc\n11:cpu,cpuacct:/kubepods/pod1/abc\n9:memory:/kubepods/pod1/abc\n1:name=systemd:/kubepods/pod1/abc\n"
	for _, tc := range []struct {
		name, content string
		simulated     bool
		want          string
		err           bool
	}{
		{name: "unified", content: v2, want: "/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope"},
		{name: "hybrid takes the unified line", content: v1 + "0::/kubepods/pod1/abc-unified\n", want: "/kubepods/pod1/abc-unified"},
		{name: "v1 host, real root", content: v1, err: true},
		{name: "v1 host, simulated root: the memory controller's path", content: v1, simulated: true, want: "/kubepods/pod1/abc"},
		{name: "a path with colons", content: "0::/a:b/c\n", want: "/a:b/c"},
		{name: "the root cgroup", content: "0::/\n", err: true},
		{name: "empty", content: "", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.process(42, tc.content)
			got, err := procCgroup(n.proc, 42, tc.simulated)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("procCgroup = %q, %v; want %q, error %v", got, err, tc.want, tc.err)
			}
		})
	}
	if _, err := procCgroup(t.TempDir(), 42, false); err == nil {
		t.Error("a process that is gone: no error")
	}
}
