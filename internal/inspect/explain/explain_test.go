package explain

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// explainFleet is a cluster of simulated nodes published exactly as the
// agent publishes them, and an alloctest.Cluster over the same slices to
// allocate with directly.
type explainFleet struct {
	slices  []*resourceapi.ResourceSlice
	nodes   []string
	classes []*resourceapi.DeviceClass
	cluster *alloctest.Cluster
	// allocated are the claims allocated with allocate.
	allocated []resourceapi.ResourceClaim
}

func newExplainFleet(t *testing.T) *explainFleet {
	t.Helper()
	f := &explainFleet{}
	for _, m := range []struct {
		profile, node string
		opts          publish.Options
		passthrough   bool // as the local cluster's gpu-h100 and gpu-mi300x (demo 21)
	}{
		{"dgx-h100", "dgx-0", publish.Options{Partitioning: publish.Static}, true},
		{"dgx-h100", "dyn-0", publish.Options{Partitioning: publish.Dynamic}, false},
		{"mi300x-8", "mi300x-0", publish.Options{Partitioning: publish.Static}, true},
		{"mi300x-8", "mi300x-dyn-0", publish.Options{Partitioning: publish.Dynamic}, false},
		{"mixed-inference", "mixed-0", publish.Options{Partitioning: publish.Static}, false},
		{"l4-4", "l4-0", publish.Options{Partitioning: publish.Static, Sharing: publish.SharingCapacity}, false},
		{"gb200-nvl72-tray", "tray-0", publish.Options{Partitioning: publish.Static}, false},
		{"gb200-nvl72-tray", "tray-1", publish.Options{Partitioning: publish.Static}, false},
	} {
		publishSim := alloctest.PublishSimWith
		if m.passthrough {
			publishSim = alloctest.PublishSimPassthrough
		}
		s, _ := publishSim(t, m.profile, m.node, m.opts)
		f.slices = append(f.slices, s...)
		f.nodes = append(f.nodes, m.node)
	}
	// The trays' domain offers its IMEX channels (demo 19).
	f.slices = append(f.slices, channelSlice(t, rackDomain, 4))
	slices.Sort(f.nodes)
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	f.classes = classes
	copies := make([]*resourceapi.ResourceSlice, len(f.slices))
	for i, s := range f.slices {
		copies[i] = s.DeepCopy()
	}
	f.cluster = alloctest.NewCluster(copies, classes)
	return f
}

// allocate allocates claim on node with the allocator and keeps it as an
// allocated claim of the snapshot.
func (f *explainFleet) allocate(t *testing.T, node string, c *resourceapi.ResourceClaim) {
	t.Helper()
	res, err := f.cluster.Allocate(context.Background(), node, c)
	if err != nil || res == nil {
		t.Fatalf("allocating %s on %s: %v (nil result: %v)", c.Name, node, err, res == nil)
	}
	f.allocated = append(f.allocated, *c.DeepCopy())
}

func (f *explainFleet) input() *Input {
	s := &inspect.Snapshot{Source: "test fleet", Claims: f.allocated}
	for _, sl := range f.slices {
		s.Slices = append(s.Slices, *sl.DeepCopy())
	}
	return &Input{Snapshot: s, Classes: f.classes}
}

// direct is the set of nodes the allocator itself fits claims on.
func (f *explainFleet) direct(t *testing.T, claims []*resourceapi.ResourceClaim) []string {
	t.Helper()
	ctx := context.Background()
	a, err := f.cluster.NewAllocator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pending []*resourceapi.ResourceClaim
	for _, c := range claims {
		pending = append(pending, pendingCopy(c))
	}
	// The nodes as their agents label them (a tray with its domain).
	nodes := map[string]*v1.Node{}
	for _, n := range inspect.NodesOf(f.input().Snapshot) {
		nodes[n.Name] = n.Node()
	}
	var out []string
	for _, n := range f.nodes {
		res, err := a.Allocate(ctx, nodes[n], pending)
		if err == nil && res != nil {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, inspect.CompareDeviceNames)
	return out
}

func explainText(t *testing.T, ex *Explanation) string {
	t.Helper()
	var b bytes.Buffer
	if err := Print(&b, ex, inspect.OutputTable); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkConsistent asserts the words never contradict the verdict: a node
// that fits has enough usable devices for every request, one that does
// not has reasons.
func checkConsistent(t *testing.T, ex *Explanation) {
	t.Helper()
	for _, n := range ex.Nodes {
		if !n.Fits {
			if len(n.Reasons) == 0 {
				t.Errorf("node %s does not fit but has no reason", n.Node)
			}
			continue
		}
		if len(n.Devices) == 0 {
			t.Errorf("node %s fits but lists no device", n.Node)
		}
		alt := map[string]bool{}
		for _, r := range n.Requests {
			if r.Alternative > 0 {
				p, _, _ := strings.Cut(r.Request, "/")
				alt[r.Claim+" "+p] = alt[r.Claim+" "+p] || r.Enough
				continue
			}
			if !r.Enough {
				t.Errorf("node %s fits, but request %s is reported short: %s", n.Node, r.Request, funnel(&r))
			}
		}
		for k, ok := range alt {
			if !ok {
				t.Errorf("node %s fits, but no alternative of %s is reported enough", n.Node, k)
			}
		}
	}
}

// demoInput reads the repository's demo manifests.
func demoInput(t *testing.T) *Input {
	t.Helper()
	in := &Input{Snapshot: &inspect.Snapshot{}}
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "demo", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("demo files: %v %v", files, err)
	}
	// Each scenario in a namespace of its own, as the demo and the e2e
	// apply them: two scenarios may name a pod alike.
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pods, templates, claims := len(in.Pods), len(in.Templates), len(in.Snapshot.Claims)
		if err := in.Snapshot.Decode(p, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if err := in.decodeExtras(p, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		ns := strings.TrimSuffix(filepath.Base(p), ".yaml")
		for i := pods; i < len(in.Pods); i++ {
			in.Pods[i].Namespace = ns
		}
		for i := templates; i < len(in.Templates); i++ {
			in.Templates[i].Namespace = ns
		}
		for i := claims; i < len(in.Snapshot.Claims); i++ {
			in.Snapshot.Claims[i].Namespace = ns
		}
	}
	return in
}

func TestExplainDemo(t *testing.T) {
	f := newExplainFleet(t)
	demo := demoInput(t)
	ctx := context.Background()
	checked := 0
	for _, p := range demo.Pods {
		expect := p.Annotations["demo.tessera.dev/expect"]
		if len(p.Spec.ResourceClaims) == 0 || expect == "rejected" {
			continue // 01 uses an extended resource, 07's postprocessor no GPU
		}
		t.Run(p.Name, func(t *testing.T) {
			_, claims, err := demo.Resolve(p.Namespace, "pod/"+p.Name)
			if err != nil {
				t.Fatal(err)
			}
			in := f.input()
			ex, err := Run(ctx, in, p.Name, claims)
			if err != nil {
				t.Fatal(err)
			}
			checkConsistent(t, ex)
			text := explainText(t, ex)
			t.Log("\n" + text)
			got, want := ex.Fitting(), f.direct(t, claims)
			if !slices.Equal(got, want) {
				t.Errorf("explain fits on %v, the allocator on %v", got, want)
			}
			if len(ex.Nodes) != len(f.nodes) {
				t.Errorf("%d node blocks, want %d", len(ex.Nodes), len(f.nodes))
			}
			if expect == "unschedulable" && p.Spec.SchedulingGroup != nil {
				// A gang member (demo 17) waits for its group, not for
				// itself: alone, on a fleet where the gang before it
				// holds nothing, it fits. The group's verdict is
				// TestRunGang's and the e2e's.
				if len(got) == 0 {
					t.Fatalf("gang member %s fits nowhere even alone:\n%s", p.Name, text)
				}
				return
			}
			if expect == "unschedulable" {
				if len(got) != 0 {
					t.Fatalf("expected to fit nowhere, fits on %v", got)
				}
				for _, n := range ex.Nodes {
					if !slices.ContainsFunc(n.Reasons, func(r string) bool {
						return strings.Contains(r, "matchAttribute gpu.tessera.dev/fabricIsland")
					}) {
						t.Errorf("node %s: no reason names the fabricIsland constraint: %q", n.Node, n.Reasons)
					}
				}
				if !strings.Contains(text, "fits on no node") {
					t.Errorf("text does not say it fits nowhere:\n%s", text)
				}
				return
			}
			if len(got) == 0 {
				t.Fatalf("a demo pod expected to run fits nowhere:\n%s", text)
			}
		})
		checked++
	}
	if checked < 15 {
		t.Errorf("checked %d demo pods, want every one with claims", checked)
	}
}

// TestExplainRandom compares explain's verdict per node with the
// allocator's for random claims, on a fleet partly allocated already.
func TestExplainRandom(t *testing.T) {
	f := newExplainFleet(t)
	h100 := `device.attributes["gpu.tessera.dev"].model == "H100"`
	f.allocate(t, "dgx-0", alloctest.Claim("held-h100", alloctest.Request{Name: "gpu", Class: "gpu.tessera.dev", Count: 3, CEL: []string{h100}}))
	f.allocate(t, "dyn-0", alloctest.Claim("held-mig-1", alloctest.Request{Name: "s", Class: "mig.gpu.tessera.dev", CEL: []string{`device.attributes["gpu.tessera.dev"].profile == "3g.40gb"`}}))
	f.allocate(t, "dyn-0", alloctest.Claim("held-mig-2", alloctest.Request{Name: "s", Class: "mig.gpu.tessera.dev", CEL: []string{`device.attributes["gpu.tessera.dev"].profile == "1g.10gb"`}}))
	f.allocate(t, "dyn-0", alloctest.Claim("held-whole", alloctest.Request{Name: "gpu", Class: "nvidia.gpu.tessera.dev", Count: 2}))
	f.allocate(t, "l4-0", alloctest.Claim("held-share-1", alloctest.Request{Name: "gpu", Class: "nvidia.gpu.tessera.dev", Capacity: map[string]string{"memory": "20Gi"}}))
	f.allocate(t, "l4-0", alloctest.Claim("held-share-2", alloctest.Request{Name: "gpu", Class: "nvidia.gpu.tessera.dev", Capacity: map[string]string{"memory": "20Gi"}}))
	f.allocate(t, "mixed-0", alloctest.Claim("held-t4", alloctest.Request{Name: "gpu", Class: "gpu.tessera.dev", CEL: []string{`device.attributes["gpu.tessera.dev"].model == "T4"`}}))

	rng := rand.New(rand.NewSource(20260101))
	pick := func(xs ...string) string { return xs[rng.Intn(len(xs))] }
	classes := []string{"gpu.tessera.dev", "gpu.tessera.dev", "nvidia.gpu.tessera.dev", "amd.gpu.tessera.dev", "mig.gpu.tessera.dev", "xcp.gpu.tessera.dev"}
	selectors := func(class string) []string {
		var out []string
		if strings.HasPrefix(class, "mig") {
			if rng.Intn(2) == 0 {
				out = append(out, fmt.Sprintf(`device.attributes["gpu.tessera.dev"].profile == %q`, pick("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb", "4g.40gb")))
			}
			return out
		}
		if rng.Intn(2) == 0 {
			out = append(out, fmt.Sprintf(`device.attributes["gpu.tessera.dev"].model == %q`, pick("H100", "A100", "MI300X", "T4", "L4", "MI210")))
		}
		if rng.Intn(3) == 0 {
			out = append(out, fmt.Sprintf(`device.capacity["gpu.tessera.dev"].memory.compareTo(quantity(%q)) %s 0`, pick("16Gi", "24Gi", "40Gi", "80Gi"), pick(">=", "<=")))
		}
		return out
	}
	ctx := context.Background()
	fitting := 0
	for i := range 50 {
		var c *resourceapi.ResourceClaim
		name := fmt.Sprintf("random-%02d", i)
		if rng.Intn(5) == 0 {
			a1 := alloctest.Request{Name: "first", Class: pick(classes...), Count: int64(1 + rng.Intn(4))}
			a1.CEL = selectors(a1.Class)
			a2 := alloctest.Request{Name: "second", Class: pick(classes...), Count: int64(1 + rng.Intn(4))}
			a2.CEL = selectors(a2.Class)
			c = alloctest.FirstAvailable(name, a1, a2)
		} else {
			r := alloctest.Request{Name: "gpus", Class: pick(classes...), Count: int64(1 + rng.Intn(4))}
			r.CEL = selectors(r.Class)
			if rng.Intn(6) == 0 {
				r.Capacity = map[string]string{"memory": pick("4Gi", "10Gi", "22Gi")}
			}
			c = alloctest.Claim(name, r)
		}
		switch rng.Intn(6) {
		case 0, 1:
			alloctest.MatchAttribute(c, "gpu.tessera.dev/fabricIsland")
		case 2:
			alloctest.MatchAttribute(c, "resource.kubernetes.io/pcieRoot")
		case 3:
			alloctest.DistinctAttribute(c, "gpu.tessera.dev/uuid")
		}
		claims := []*resourceapi.ResourceClaim{c}
		ex, err := Run(ctx, f.input(), "", claims)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkConsistent(t, ex)
		got, want := ex.Fitting(), f.direct(t, claims)
		slices.SortFunc(got, inspect.CompareDeviceNames)
		if !slices.Equal(got, want) {
			t.Errorf("%s: explain fits on %v, the allocator on %v\n%s", name, got, want, explainText(t, ex))
		}
		if len(got) > 0 {
			fitting++
		}
		if i < 3 {
			t.Log("\n" + explainText(t, ex))
		}
	}
	if fitting < 10 || fitting > 45 {
		t.Errorf("%d of 50 random claims fit somewhere; the generator should mix fits and misfits", fitting)
	}
}

// TestExplainDynamicHalfFull: on a dynamic node with whole GPUs and MIG
// slices allocated, a claim for more whole GPUs than are left names the
// exhausted counter sets and the claims holding them.
func TestExplainDynamicHalfFull(t *testing.T) {
	f := newExplainFleet(t)
	mig := func(name, profile string) *resourceapi.ResourceClaim {
		return alloctest.Claim(name, alloctest.Request{Name: "slice", Class: "mig.gpu.tessera.dev",
			CEL: []string{fmt.Sprintf(`device.attributes["gpu.tessera.dev"].profile == %q`, profile)}})
	}
	f.allocate(t, "dyn-0", alloctest.Claim("whole-three", alloctest.Request{Name: "gpu", Class: "nvidia.gpu.tessera.dev", Count: 3}))
	migClaims := []string{"mig-small-a", "mig-small-b", "mig-medium-a", "mig-medium-b", "mig-large"}
	for i, name := range migClaims {
		f.allocate(t, "dyn-0", mig(name, []string{"1g.10gb", "1g.10gb", "3g.40gb", "3g.40gb", "4g.40gb"}[i]))
	}
	want := alloctest.Claim("six-h100", alloctest.Request{Name: "gpus", Class: "nvidia.gpu.tessera.dev", Count: 6,
		CEL: []string{`device.attributes["gpu.tessera.dev"].model == "H100"`}})
	// Only dyn-0 in the snapshot: the node the claim is about.
	in := f.input()
	var dyn []resourceapi.ResourceSlice
	for _, s := range in.Snapshot.Slices {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == "dyn-0" {
			dyn = append(dyn, s)
		}
	}
	in.Snapshot.Slices = dyn
	ex, err := Run(context.Background(), in, "", []*resourceapi.ResourceClaim{want})
	if err != nil {
		t.Fatal(err)
	}
	text := explainText(t, ex)
	t.Log("\n" + text)
	checkConsistent(t, ex)
	if len(ex.Nodes) != 1 || ex.Nodes[0].Fits {
		t.Fatalf("want one node that does not fit:\n%s", text)
	}
	n := ex.Nodes[0]
	r := n.Requests[0]
	if r.InUse != 3 || !slices.Equal(r.InUseBy, []string{"default/whole-three"}) {
		t.Errorf("in use %d by %v, want 3 by default/whole-three", r.InUse, r.InUseBy)
	}
	if r.CountersExhausted == 0 || len(r.Counters) == 0 {
		t.Fatalf("no exhausted counters reported:\n%s", text)
	}
	held := map[string]bool{}
	for _, c := range r.Counters {
		if len(c.Counters) == 0 || c.Devices == 0 {
			t.Errorf("counter report %+v names no counter or device", c)
		}
		for _, h := range c.HeldBy {
			held[h] = true
		}
	}
	for _, name := range migClaims {
		if !held["default/"+name] {
			t.Errorf("MIG claim %s holds counters but is not named: %v", name, held)
		}
		if !strings.Contains(text, "default/"+name) {
			t.Errorf("text does not name %s", name)
		}
	}
	if !strings.Contains(text, "counter set gpu-") || !strings.Contains(text, "exhausted") {
		t.Errorf("text does not name an exhausted counter set:\n%s", text)
	}
	// The same claim for whole GPUs that are left fits, on the GPUs nobody holds.
	free := int64(r.Usable)
	fits := alloctest.Claim("left-h100", alloctest.Request{Name: "gpus", Class: "nvidia.gpu.tessera.dev", Count: free})
	ex, err = Run(context.Background(), in, "", []*resourceapi.ResourceClaim{fits})
	if err != nil {
		t.Fatal(err)
	}
	if !ex.Nodes[0].Fits || int64(len(ex.Nodes[0].Devices)) != free {
		t.Errorf("claim for the %d free GPUs: %s", free, explainText(t, ex))
	}
}

// TestExplainFiles runs explain offline on the testdata node files and a
// demo manifest: pods and templates from the files, the shipped classes.
func TestExplainFiles(t *testing.T) {
	dir := inspecttest.Testdata()
	in, err := LoadFiles([]string{
		filepath.Join(dir, "dgx-h100.yaml"), filepath.Join(dir, "mi300x-8.yaml"), filepath.Join(dir, "mixed-inference.yaml"),
		filepath.Join(dir, "l4-4-capacity.yaml"), filepath.Join(dir, "l4-4-capacity-claims.yaml"),
		filepath.Join("..", "..", "..", "demo", "08-unsatisfiable.yaml"), filepath.Join("..", "..", "..", "demo", "14-gpu-shares-l4.yaml"),
		filepath.Join(dir, "explain", "pending-claim.yaml"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !in.ShippedClasses || len(in.Classes) == 0 {
		t.Errorf("want the shipped classes, got %d (shipped %v)", len(in.Classes), in.ShippedClasses)
	}
	for _, tc := range []struct{ name, ns, target string }{
		{"explain-08-unsatisfiable", "", "pod/too-big-job"},
		{"explain-14-share", "", "pod/share-1"},
		{"explain-pending-h100-pair", "team-a", "h100-pair"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, claims, err := in.Resolve(tc.ns, tc.target)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := Run(context.Background(), in, pod, claims)
			if err != nil {
				t.Fatal(err)
			}
			checkConsistent(t, ex)
			inspecttest.Golden(t, filepath.Join("explain", tc.name+".txt"), []byte(explainText(t, ex)))
			var j bytes.Buffer
			if err := Print(&j, ex, inspect.OutputJSON); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, _, err := in.Resolve("", "no-such-claim"); err == nil {
		t.Error("an unknown claim resolved")
	}
	if _, _, err := in.Resolve("", "deployment/x"); err == nil {
		t.Error("deployment/x resolved")
	}
}
