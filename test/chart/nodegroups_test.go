package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderValues renders the chart as release "tessera" with values (as a
// values file, as a user's -f).
func renderValues(t *testing.T, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	data, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return chart(t).RenderValues("tessera", ns, f)
}

// threeGroups: static-MIG, dynamic and shared nodes in one release.
func threeGroups() map[string]any {
	return map[string]any{
		"nodeSelector": map[string]string{"example.com/gpu": "true"},
		"tolerations":  []map[string]string{{"key": "gpu", "operator": "Exists"}},
		"nodeGroups": []map[string]any{
			{"name": "static-mig", "nodeSelector": map[string]string{"example.com/mode": "static"}},
			{"name": "dynamic", "nodeSelector": map[string]string{"example.com/mode": "dynamic"},
				"partitioning": "dynamic", "dynamicProfiles": []string{"1g.10gb", "7g.80gb"}},
			{"name": "shared", "nodeSelector": map[string]string{"example.com/mode": "shared"},
				"sharing": "capacity", "logging": map[string]any{"verbosity": 5}},
		},
	}
}

// TestNodeGroupsDaemonSets: one DaemonSet per group, named after it, each
// selecting its own pods (its group label) on its own nodes (its selector
// added to the release's), with the release's settings and its group's
// over them; the release's other objects are there once, as without
// groups, and no DaemonSet of the release's plain name is left.
func TestNodeGroupsDaemonSets(t *testing.T) {
	objs, err := renderValues(t, threeGroups())
	if err != nil {
		t.Fatal(err)
	}
	dss := map[string]*appsv1.DaemonSet{}
	for _, name := range []string{"tessera-static-mig", "tessera-dynamic", "tessera-shared"} {
		dss[name] = one[appsv1.DaemonSet](t, objs, "DaemonSet", name)
	}
	if n := len(kindsOf(objs, "DaemonSet")); n != 3 {
		t.Errorf("%d DaemonSets, want one per group: %v", n, kindsOf(objs, "DaemonSet"))
	}
	want := map[string]struct {
		mode     string
		env      map[string]string
		verbose  string
		absent   []string
		selector string
	}{
		"tessera-static-mig": {"static", map[string]string{"TESSERA_PARTITIONING": "static", "TESSERA_SHARING": "none"}, "-v=0", []string{"TESSERA_DYNAMIC_PROFILES"}, "static-mig"},
		"tessera-dynamic":    {"dynamic", map[string]string{"TESSERA_PARTITIONING": "dynamic", "TESSERA_SHARING": "none", "TESSERA_DYNAMIC_PROFILES": "1g.10gb,7g.80gb"}, "-v=0", nil, "dynamic"},
		"tessera-shared":     {"shared", map[string]string{"TESSERA_PARTITIONING": "static", "TESSERA_SHARING": "capacity"}, "-v=5", []string{"TESSERA_DYNAMIC_PROFILES"}, "shared"},
	}
	for name, ds := range dss {
		w := want[name]
		spec := ds.Spec.Template.Spec
		if got := spec.NodeSelector; !reflect.DeepEqual(got, map[string]string{"example.com/gpu": "true", "example.com/mode": w.mode}) {
			t.Errorf("%s: nodeSelector %v, want the release's and the group's", name, got)
		}
		if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "gpu" {
			t.Errorf("%s: tolerations %v, want the release's", name, spec.Tolerations)
		}
		if got := ds.Spec.Selector.MatchLabels["gpu.tessera.dev/node-group"]; got != w.selector {
			t.Errorf("%s: selects node group %q, want %q", name, got, w.selector)
		}
		if got := ds.Spec.Template.Labels["gpu.tessera.dev/node-group"]; got != w.selector {
			t.Errorf("%s: pods labelled node group %q, want %q", name, got, w.selector)
		}
		e := env(&spec.Containers[0])
		for k, v := range w.env {
			if e[k] != v {
				t.Errorf("%s: %s=%q, want %q", name, k, e[k], v)
			}
		}
		for _, k := range w.absent {
			if _, ok := e[k]; ok {
				t.Errorf("%s: %s set to %q, the group does not set it", name, k, e[k])
			}
		}
		if args := spec.Containers[0].Args; len(args) == 0 || args[0] != w.verbose {
			t.Errorf("%s: args %q, want %s first", name, args, w.verbose)
		}
	}
	// Everything but the DaemonSets is the release's one set: the same as
	// rendered without groups.
	plain, err := renderValues(t, map[string]any{"nodeSelector": map[string]string{"example.com/gpu": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := others(objs), others(plain); !reflect.DeepEqual(got, want) {
		t.Errorf("objects besides the DaemonSets:\n with groups    %v\n without groups %v", got, want)
	}
	if n := len(kindsOf(plain, "DeviceClass")); n == 0 || n != len(kindsOf(objs, "DeviceClass")) {
		t.Errorf("DeviceClasses: %d with groups, %d without; want them once", len(kindsOf(objs, "DeviceClass")), n)
	}
}

// TestNoNodeGroupsIsOneDaemonSet: without groups the DaemonSet keeps its
// name and selector (a selector cannot change on upgrade), without a group
// label.
func TestNoNodeGroupsIsOneDaemonSet(t *testing.T) {
	ds, _ := daemonSet(t, render(t))
	if _, ok := ds.Spec.Selector.MatchLabels["gpu.tessera.dev/node-group"]; ok {
		t.Errorf("selector %v has a node group", ds.Spec.Selector.MatchLabels)
	}
	if _, ok := ds.Spec.Template.Labels["gpu.tessera.dev/node-group"]; ok {
		t.Errorf("pod labels %v have a node group", ds.Spec.Template.Labels)
	}
}

// TestNodeGroupsRefused: what would break the release's one set of
// cluster-wide objects, or put two agents on a node, is refused with why.
func TestNodeGroupsRefused(t *testing.T) {
	sel := func(v string) map[string]string { return map[string]string{"example.com/mode": v} }
	for name, tc := range map[string]struct {
		groups []map[string]any
		want   string
	}{
		"backend":        {[]map[string]any{{"name": "a", "nodeSelector": sel("a"), "backend": "amd"}}, "backend cannot differ between groups"},
		"image":          {[]map[string]any{{"name": "a", "nodeSelector": sel("a"), "image": map[string]any{"tag": "x"}}}, "image cannot differ between groups"},
		"mps":            {[]map[string]any{{"name": "a", "nodeSelector": sel("a"), "mps": map[string]any{"daemons": "process"}}}, "mps cannot differ between groups"},
		"sim state":      {[]map[string]any{{"name": "a", "nodeSelector": sel("a"), "sim": map[string]any{"stateDir": "/x"}}}, "only sim.profile"},
		"no selector":    {[]map[string]any{{"name": "a", "sharing": "capacity"}}, "needs a nodeSelector or affinity"},
		"same selector":  {[]map[string]any{{"name": "a", "nodeSelector": sel("a")}, {"name": "b", "nodeSelector": sel("a")}}, "a and b select the same nodes"},
		"same name":      {[]map[string]any{{"name": "a", "nodeSelector": sel("a")}, {"name": "a", "nodeSelector": sel("b")}}, `two groups are named "a"`},
		"name not label": {[]map[string]any{{"name": "Big_Group", "nodeSelector": sel("a")}}, "must be a DNS label"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderValues(t, map[string]any{"nodeGroups": tc.groups})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func kindsOf(objs []*unstructured.Unstructured, kind string) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o.GetName())
		}
	}
	return out
}

// others: kind/name of every object but the DaemonSets.
func others(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, k := range kinds(objs) {
		if !strings.HasPrefix(k, "DaemonSet/") {
			out = append(out, k)
		}
	}
	return out
}
