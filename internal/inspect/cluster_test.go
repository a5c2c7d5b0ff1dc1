package inspect_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
	"github.com/tessera-gpu/tessera/internal/inspect/inventorycmd"
)

// FromCluster reads the same objects the files hold, and only lists.
func TestFromClusterOnlyLists(t *testing.T) {
	files := inspecttest.Load(t, "dgx-h100-dynamic.yaml", "dgx-h100-dynamic-claims.yaml")
	var objs []runtime.Object
	for i := range files.Slices {
		s := files.Slices[i].DeepCopy()
		s.Name = s.GenerateName + "x" // the API server names them
		objs = append(objs, s)
	}
	for i := range files.Claims {
		objs = append(objs, files.Claims[i].DeepCopy())
	}
	c := fake.NewClientset(objs...)
	s, err := inspect.FromCluster(context.Background(), c, "dgx-h100-dyn")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Slices) != len(files.Slices) || len(s.Claims) != len(files.Claims) {
		t.Errorf("got %d slices, %d claims; want %d, %d", len(s.Slices), len(s.Claims), len(files.Slices), len(files.Claims))
	}
	for _, a := range c.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("action %s %s: only list is allowed", a.GetVerb(), a.GetResource().Resource)
		}
	}
	inv, err := inventorycmd.Build(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Fleet.InUse; got != 6 {
		t.Errorf("in use = %d, want 6 as from the files", got)
	}
}

func TestFromClusterEmpty(t *testing.T) {
	if _, err := inspect.FromCluster(context.Background(), fake.NewClientset(), "n1"); err == nil {
		t.Error("no error for a node without slices")
	}
}
