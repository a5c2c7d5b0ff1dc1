package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRebootNodeRefuses(t *testing.T) {
	tests := []struct {
		name    string
		runtime string
		node    string
		want    string
	}{
		{name: "containerd node", runtime: RuntimeContainerd, node: "gpu-h100", want: "only fake-runtime nodes"},
		{name: "unknown node", runtime: RuntimeFake, node: "gpu-nope", want: "no such node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Dir: t.TempDir(), Runtime: tt.runtime}
			s := &State{Nodes: []Node{{Name: "gpu-h100", Profile: "dgx-h100"}}}
			if err := c.RebootNode(s, tt.node); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RebootNode = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestEmptyDir(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"claim.json", "sub/deeper.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := emptyDir(dir); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("after emptyDir: %v entries, %v; want the directory, empty", len(entries), err)
	}
	if err := emptyDir(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("emptyDir of a missing directory: %v", err)
	}
}
