package inspect_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
	"github.com/tessera-gpu/tessera/internal/inspect/inventorycmd"
	"github.com/tessera-gpu/tessera/internal/names"
)

func TestLoadFilesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	slice := filepath.Join("testdata", "dgx-h100.yaml")
	for _, tc := range []struct {
		name  string
		files []string
		want  []string // substrings of the error
	}{
		{"not yaml", []string{write("broken.yaml", "kind: [ResourceSlice\n  : {\n")}, []string{"broken.yaml", "not YAML or JSON"}},
		{"not json", []string{write("broken.json", `{"kind": "ResourceSlice",`)}, []string{"broken.json"}},
		{"plain text", []string{write("notes.txt", "just some text\n")}, []string{"notes.txt", "document 1", "not a Kubernetes object"}},
		{"second document bad", []string{write("two.yaml", "apiVersion: v1\nkind: ConfigMap\n---\n- a\n- b\n")}, []string{"two.yaml", "document 2"}},
		{"old api version", []string{write("beta.yaml", "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nspec: {driver: gpu.tessera.dev}\n")}, []string{"beta.yaml", "v1beta1", "resource.k8s.io/v1"}},
		{"bad field", []string{write("field.yaml", "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nspec: {devices: 3}\n")}, []string{"field.yaml", "ResourceSlice"}},
		{"missing file", []string{filepath.Join(dir, "absent.yaml")}, []string{"absent.yaml"}},
		{"no slices", []string{write("claims.yaml", "apiVersion: v1\nkind: ConfigMap\n")}, []string{"no ResourceSlices", "claims.yaml"}},
		{"good then bad", []string{slice, write("bad2.yaml", "{")}, []string{"bad2.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inspect.LoadFiles(tc.files)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadFilesKinds(t *testing.T) {
	s := inspecttest.Load(t, "dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml")
	if got, want := len(s.Slices), 5; got != want {
		t.Errorf("slices = %d, want %d", got, want)
	}
	// 2 single claims, 4 in a List, a pending one and another driver's;
	// the ConfigMap is skipped.
	if got, want := len(s.Claims), 8; got != want {
		t.Errorf("claims = %d, want %d", got, want)
	}
}

func TestLoadFilesJSONList(t *testing.T) {
	p := filepath.Join(t.TempDir(), "list.json")
	list := `{"apiVersion":"v1","kind":"List","items":[
	 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","spec":{"driver":"gpu.tessera.dev","nodeName":"n1",
	  "pool":{"name":"n1","generation":2,"resourceSliceCount":1},
	  "devices":[{"name":"gpu-0","attributes":{"gpu.tessera.dev/type":{"string":"gpu"},"gpu.tessera.dev/model":{"string":"H200"}},
	   "capacity":{"gpu.tessera.dev/memory":{"value":"141Gi"}}}]}},
	 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","spec":{"driver":"gpu.tessera.dev","nodeName":"n1",
	  "pool":{"name":"n1","generation":1,"resourceSliceCount":1},
	  "devices":[{"name":"gpu-9","attributes":{"type":{"string":"gpu"}}}]}},
	 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","spec":{"driver":"other.example.com","nodeName":"n1",
	  "pool":{"name":"n1","generation":1,"resourceSliceCount":1},"devices":[{"name":"nic-0"}]}}]}`
	if err := os.WriteFile(p, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := inspect.LoadFiles([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Slices) != 2 {
		t.Fatalf("slices = %d, want the 2 of %s", len(s.Slices), names.DriverName)
	}
	inv, err := inventorycmd.Build(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Qualified attribute names read like unqualified ones; the stale
	// generation 1 slice (gpu-9) is left out.
	gpus := inv.Nodes[0].GPUs
	if len(gpus) != 1 || gpus[0].Device != "gpu-0" || gpus[0].Model != "H200" || inspect.HumanBytes(gpus[0].MemoryBytes) != "141Gi" {
		t.Errorf("GPUs = %+v, want gpu-0 H200 141Gi only", gpus)
	}
}
