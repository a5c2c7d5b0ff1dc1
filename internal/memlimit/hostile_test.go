package memlimit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileRecords: a record in the state directory that names a cgroup
// outside the cgroup root (or the root itself), or that is otherwise not
// one the hook writes, has nothing lifted on release: the simulated hook
// removes no directory, the kernel one writes no dmem.max, outside the
// root or at it. The record's file goes, and the error names it.
func TestHostileRecords(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cgroup    string
		container string
		member    string
		pod       string
		region    string
	}{
		{name: "dot-dot out of the root", cgroup: "/../victim"},
		{name: "dot-dot below a cgroup", cgroup: "/a/../../victim"},
		{name: "the root's parent", cgroup: "/.."},
		{name: "the root", cgroup: "/"},
		{name: "empty", cgroup: ""},
		{name: "relative", cgroup: "../victim"},
		{name: "unclean", cgroup: "//victim"},
		{name: "a newline", cgroup: "/a\n/b"},
		{name: "a container id with a slash", cgroup: "/a", container: "../../victim"},
		{name: "a pod UID with a slash", cgroup: "/a", pod: "../victim"},
		{name: "a member outside its pod", cgroup: "/a", member: "/b/c1"},
		{name: "a region with a second line", cgroup: "/a", region: region + " 1\nother 2"},
	} {
		for _, simulated := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: ",simulated", false: ",kernel"}[simulated], func(t *testing.T) {
				n := newNode(t)
				n.write("dmem.capacity", region+" 24152899584\n")
				n.write("a/dmem.max", region+" 1024\n")
				victim := filepath.Join(filepath.Dir(n.root), "victim")
				if err := os.MkdirAll(victim, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(victim, "dmem.max"), []byte("untouched\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				m := Member{Container: "c1", PID: 1, Cgroup: tc.cgroup + "/c1"}
				if tc.container != "" {
					m.Container = tc.container
				}
				if tc.member != "" {
					m.Cgroup = tc.member
				}
				rec := Record{Limit: share("uid-1", "gpu-0"), Pod: "aaa", Cgroup: tc.cgroup, Members: []Member{m}}
				if tc.pod != "" {
					rec.Pod = tc.pod
				}
				if tc.region != "" {
					rec.Region = tc.region
				}
				b, err := json.Marshal(rec)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(n.state, 0o755); err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(n.state, "uid-1.gpu-0.json")
				if err := os.WriteFile(file, b, 0o644); err != nil {
					t.Fatal(err)
				}

				err = ReleaseClaim(n.hook(simulated), "uid-1", n.env())
				if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "nothing lifted") {
					t.Errorf("release: %v, want an error naming %s", err, file)
				}
				if got, err := os.ReadFile(filepath.Join(victim, "dmem.max")); err != nil || string(got) != "untouched\n" {
					t.Errorf("outside the cgroup root: %q, %v; want it untouched", got, err)
				}
				if _, err := os.Stat(filepath.Join(n.root, "dmem.capacity")); err != nil {
					t.Errorf("the cgroup root: %v", err)
				}
				if got := n.read("a/dmem.max"); got != region+" 1024\n" {
					t.Errorf("cgroup /a: dmem.max %q; want it untouched", got)
				}
				if _, err := os.Stat(file); !os.IsNotExist(err) {
					t.Errorf("the hostile record: %v, want it removed", err)
				}
				if err := ReleaseClaim(n.hook(simulated), "uid-1", n.env()); err != nil {
					t.Errorf("a second release: %v, want nothing left to release", err)
				}
			})
		}
	}
}
