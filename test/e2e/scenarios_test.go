package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// got is what one running pod of a scenario ended up with.
type got struct {
	placement *scenario.Placement
	devices   []resourceapi.Device // published devices, in allocation order
	requests  []string
	// byContainer are the devices each container uses: its claims'
	// devices, only those of the request it names where it names one.
	byContainer map[string][]resourceapi.Device
}

func memAtLeast(q string) func(resourceapi.Device) bool {
	return func(d resourceapi.Device) bool {
		m := d.Capacity["memory"].Value
		return m.Cmp(resource.MustParse(q)) >= 0
	}
}

// checks per demo file: what must be true of its running pods, by pod name.
var checks = map[string]func(t *testing.T, pods map[string]got){
	"01-legacy-nvidia-gpu.yaml": func(t *testing.T, pods map[string]got) {
		expectDevices(t, pods["legacy-two-gpus"], 2, func(d resourceapi.Device) bool { return str(d, "vendor") == "nvidia" && str(d, "type") == "gpu" })
	},
	"02-an-h100.yaml": func(t *testing.T, pods map[string]got) {
		expectDevices(t, pods["h100-job"], 1, func(d resourceapi.Device) bool { return str(d, "model") == "H100" })
	},
	"03-80gi-any-vendor.yaml": func(t *testing.T, pods map[string]got) {
		expectDevices(t, pods["big-memory-job"], 1, memAtLeast("80Gi"))
	},
	"04-same-fabric-island.yaml": func(t *testing.T, pods map[string]got) {
		g := pods["linked-pair-job"]
		expectDevices(t, g, 2, func(d resourceapi.Device) bool { return str(d, "fabric") != "pcie" })
		if a, b := str(g.devices[0], "fabricIsland"), str(g.devices[1], "fabricIsland"); a != b {
			t.Errorf("islands %s and %s differ", a, b)
		}
	},
	"05-prefer-h100-a100-mi300x.yaml": func(t *testing.T, pods map[string]got) {
		g := pods["preferred-gpu-job"]
		expectDevices(t, g, 1, func(d resourceapi.Device) bool { return str(d, "model") == "H100" })
		if g.requests[0] != "gpu/h100" {
			t.Errorf("allocated for request %q, want the first choice gpu/h100", g.requests[0])
		}
	},
	"06-mig-1g-10gb.yaml": func(t *testing.T, pods map[string]got) {
		g := pods["mig-slice-job"]
		expectDevices(t, g, 1, func(d resourceapi.Device) bool {
			return str(d, "type") == "partition" && str(d, "profile") == "1g.10gb" && str(d, "partitionKind") == "mig"
		})
		// A static instance or one carved on demand: both nodes offer 1g.10gb.
		if n := g.placement.Node; n != "gpu-h100-mig" && n != "gpu-h100-dynamic" {
			t.Errorf("landed on %s", n)
		}
	},
	"07-tiered-inference.yaml": func(t *testing.T, pods map[string]got) {
		expectDevices(t, pods["pipeline-inference"], 1, memAtLeast("64Gi"))
		expectDevices(t, pods["pipeline-preprocess"], 1, func(d resourceapi.Device) bool { return !memAtLeast("24577Mi")(d) })
		expectDevices(t, pods["pipeline-postprocess"], 0, nil)
	},
	"08-unsatisfiable.yaml": func(t *testing.T, pods map[string]got) {
		if len(pods) != 0 {
			t.Errorf("pods ran: %v", pods)
		}
	},
	"09-dynamic-mig.yaml":        checkDynamicMIG,
	"22-amd-cpx-on-demand.yaml":  checkAMDModes,
	"10-time-sliced-t4.yaml":     checkTimeSliced,
	"11-mps-two-containers.yaml": checkMPS,
	"15-gpus-at-work.yaml": func(t *testing.T, pods map[string]got) {
		expectDevices(t, pods["trainer"], 1, func(d resourceapi.Device) bool { return str(d, "model") == "H100" && str(d, "type") == "gpu" })
		expectDevices(t, pods["notebook"], 1, func(d resourceapi.Device) bool { return str(d, "profile") == "1g.10gb" })
		for _, p := range []string{"chat", "embed"} {
			expectDevices(t, pods[p], 1, func(d resourceapi.Device) bool { return str(d, "model") == "L4" })
			if n := pods[p].placement.Node; n != "gpu-l4-shared" {
				t.Errorf("%s: an 8Gi share on %s, want the capacity-shared node", p, n)
			}
		}
		expectDevices(t, pods["mi300x-job"], 1, func(d resourceapi.Device) bool { return str(d, "model") == "MI300X" })
	},
	"20-gpu-monitor.yaml": checkMonitor,
}

// outcome is what a scenario's pods and objects ended up as, for checks
// that need more than the running pods.
type outcome struct {
	ns   string
	pods map[string]got
	// rejected is the API server's refusal per object ("kind name") meant
	// to be refused; prepareFailed the kubelet's event per pod whose claims
	// the driver was meant to refuse.
	rejected, prepareFailed map[string]string
}

// outcomeChecks are checks of scenarios where something is meant to be refused.
var outcomeChecks = map[string]func(t *testing.T, o outcome){
	"12-mps-on-mi300x.yaml":                  checkMPSOnAMD,
	"13-bad-config-refused.yaml":             checkRefused,
	"14-gpu-shares-l4.yaml":                  checkShares,
	"23-passthrough-beside-mig-refused.yaml": checkPassthroughRefused,
}

// afterChecks run once a scenario's pods are gone and their claims unprepared.
var afterChecks = map[string]func(t *testing.T){
	"10-time-sliced-t4.yaml":     afterTimeSliced,
	"11-mps-two-containers.yaml": afterMPS,
	"14-gpu-shares-l4.yaml":      afterShares,
	"22-amd-cpx-on-demand.yaml":  checkAMDRest,
	"09-dynamic-mig.yaml": func(t *testing.T) {
		// Everything carved for the pods is destroyed and MIG mode is back off.
		st := simState(t, dynamicNode)
		if len(st.partitions) != 0 {
			t.Errorf("partitions left on %s: %+v", dynamicNode, st.partitions)
		}
		for gpu, on := range st.migOn {
			if on {
				t.Errorf("GPU %s on %s left in MIG mode", gpu, dynamicNode)
			}
		}
	},
}

const dynamicNode = "gpu-h100-dynamic"

// checkDynamicMIG: the 1g.10gb and 3g.40gb pods got partitions carved on one
// GPU of the dynamic node (they exist while the pods run), the whole-H100 pod
// a different GPU with MIG mode off.
func checkDynamicMIG(t *testing.T, pods map[string]got) {
	isProfile := func(p string) func(resourceapi.Device) bool {
		return func(d resourceapi.Device) bool { return str(d, "type") == "partition" && str(d, "profile") == p }
	}
	small, medium, whole := pods["notebook-1g"], pods["inference-3g"], pods["training-whole"]
	expectDevices(t, small, 1, isProfile("1g.10gb"))
	expectDevices(t, medium, 1, isProfile("3g.40gb"))
	expectDevices(t, whole, 1, func(d resourceapi.Device) bool { return str(d, "type") == "gpu" && str(d, "model") == "H100" })
	for name, g := range pods {
		if g.placement.Node != dynamicNode {
			t.Errorf("pod %s ran on %s, want %s", name, g.placement.Node, dynamicNode)
		}
	}
	parent := str(small.devices[0], "parentUUID")
	if p := str(medium.devices[0], "parentUUID"); p != parent {
		t.Errorf("1g.10gb on %s, 3g.40gb on %s: the second slice opened another GPU", parent, p)
	}
	wholeUUID := str(whole.devices[0], "uuid")
	if wholeUUID == parent {
		t.Errorf("whole GPU %s is the one holding the slices", wholeUUID)
	}
	st := simState(t, dynamicNode)
	var profiles []string
	for _, p := range st.partitions {
		if p.gpu != parent {
			t.Errorf("partition %s %s on GPU %s, want only on %s", p.profile, p.uuid, p.gpu, parent)
		}
		profiles = append(profiles, p.profile)
	}
	sort.Strings(profiles)
	if strings.Join(profiles, ",") != "1g.10gb,3g.40gb" {
		t.Errorf("carved partitions %v, want 1g.10gb and 3g.40gb", profiles)
	}
	if !st.migOn[parent] || st.migOn[wholeUUID] {
		t.Errorf("MIG mode: slices' GPU %v, whole GPU %v; want on, off", st.migOn[parent], st.migOn[wholeUUID])
	}
}

// checkedElsewhere are the demo scenarios another suite runs: this
// cluster has no node they need.
var checkedElsewhere = map[string]string{
	"19-rack-job-one-domain.yaml": "test/e2e/rack (TestDemoRackJob): GB200 trays of one domain",
	"21-vm-passthrough.yaml":      "TestPassthrough/vm-pods: a passed GPU publishes no device, which runScenario looks its pods' devices up in",
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repo, "demo", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no demo scenarios: %v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		if suite, ok := checkedElsewhere[filepath.Base(f)]; ok {
			t.Logf("demo scenario %s: checked by %s, whose cluster has what it needs", filepath.Base(f), suite)
			continue
		}
		check, ok := checks[filepath.Base(f)]
		ocheck, ook := outcomeChecks[filepath.Base(f)]
		if !ok && !ook {
			t.Errorf("demo scenario %s has no end-to-end check", filepath.Base(f))
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			runScenario(t, f, check, ocheck)
		})
	}
}

func runScenario(t *testing.T, path string, check func(*testing.T, map[string]got), ocheck func(*testing.T, outcome)) {
	ctx := context.Background()
	ns := namespace(t)
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if why, err := sc.Missing(ctx, client); err != nil || why != "" {
		t.Fatalf("scenario cannot run on the e2e cluster: %s %v", why, err)
	}
	if err := sc.Apply(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	pods := map[string]got{}
	o := outcome{ns: ns, pods: pods, rejected: sc.Rejected, prepareFailed: map[string]string{}}
	var running []string
	for _, p := range sc.Pods {
		switch {
		case scenario.ExpectsUnschedulable(p):
			msg, err := scenario.WaitUnschedulable(ctx, client, ns, p.Name, 90*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			// A gang's pods wait for the group ("pod group is
			// unschedulable"); the member the group's cycle could not
			// place says why first.
			if !strings.Contains(msg, "cannot allocate all claims") && (scenario.GroupOf(p) == "" || !strings.Contains(msg, "pod group is unschedulable")) {
				t.Errorf("scheduler's reason %q for pod %s does not say the claims cannot be allocated", msg, p.Name)
			}
		case scenario.ExpectsPrepareFailure(p):
			msg, err := scenario.WaitPrepareFailed(ctx, client, ns, p.Name, 90*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			o.prepareFailed[p.Name] = msg
		default:
			running = append(running, p.Name)
		}
	}
	if err := scenario.WaitRunning(ctx, client, ns, running, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	type held struct{ node, uid string }
	var claims []held
	for _, name := range running {
		pl, err := scenario.Describe(ctx, client, ns, name, cluster.RecordDir)
		if err != nil {
			t.Fatal(err)
		}
		g := got{placement: pl, byContainer: map[string][]resourceapi.Device{}}
		pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uses := containerUses(pod)
		for _, c := range pl.Claims {
			rc, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			uid := string(rc.UID)
			claims = append(claims, held{pl.Node, uid})
			if st := checkpointClaims(t, pl.Node)[uid]; st != checkpoint.PrepareCompleted {
				t.Errorf("claim %s on %s: checkpoint state %q, want PrepareCompleted", c.Name, pl.Node, st)
			}
			if !specExists(pl.Node, uid) {
				t.Errorf("claim %s on %s: no CDI spec", c.Name, pl.Node)
			}
			for _, d := range c.Devices {
				if d.Pool != pl.Node {
					t.Errorf("device %s/%s is not on the pod's node %s", d.Pool, d.Device, pl.Node)
				}
				dev := device(t, d.Pool, d.Device)
				g.devices = append(g.devices, dev)
				g.requests = append(g.requests, d.Request)
				for ctr, refs := range uses {
					for _, ref := range refs {
						base, _, _ := strings.Cut(d.Request, "/")
						if ref.claim == c.Name && (ref.request == "" || ref.request == base) {
							g.byContainer[ctr] = append(g.byContainer[ctr], dev)
						}
					}
				}
			}
		}
		checkContainer(t, g)
		pods[name] = g
	}
	if check != nil {
		check(t, pods)
	}
	if ocheck != nil {
		ocheck(t, o)
	}

	if err := sc.Delete(ctx, client, ns, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
			_, inCheckpoint := checkpointClaims(t, c.node)[c.uid]
			return !inCheckpoint && !specExists(c.node, c.uid), "checkpoint entry or CDI spec still there"
		}); err != nil {
			t.Errorf("claim %s on %s not unprepared: %v", c.uid, c.node, err)
		}
	}
	if after := afterChecks[filepath.Base(path)]; after != nil {
		after(t)
	}
}

func expectDevices(t *testing.T, g got, n int, ok func(resourceapi.Device) bool) {
	t.Helper()
	if g.placement == nil {
		t.Fatal("pod did not run")
	}
	if len(g.devices) != n {
		t.Fatalf("pod %s got %d devices, want %d", g.placement.Pod, len(g.devices), n)
	}
	for _, d := range g.devices {
		if !ok(d) {
			t.Errorf("pod %s got device %s (%s %s), which does not match", g.placement.Pod, d.Name, str(d, "model"), str(d, "profile"))
		}
	}
}

var (
	nvidiaGPU = regexp.MustCompile(`^/dev/nvidia[0-9]+$`)
	migCap    = regexp.MustCompile(`^/dev/nvidia-caps/nvidia-cap[0-9]+$`)
	render    = regexp.MustCompile(`^/dev/dri/renderD[0-9]+$`)
	card      = regexp.MustCompile(`^/dev/dri/card[0-9]+$`)
)

// claimUse is one claim reference of a container: the ResourceClaim's
// name and the request it names ("" for all of them).
type claimUse struct{ claim, request string }

// containerUses maps each container of p to the claims it uses.
func containerUses(p *corev1.Pod) map[string][]claimUse {
	names := map[string]string{}
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			names[rc.Name] = *rc.ResourceClaimName
		}
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			names[st.Name] = *st.ResourceClaimName
		}
	}
	out := map[string][]claimUse{}
	for _, c := range p.Spec.Containers {
		for _, ref := range c.Resources.Claims {
			out[c.Name] = append(out[c.Name], claimUse{names[ref.Name], ref.Request})
		}
	}
	if p.Status.ExtendedResourceClaimStatus != nil {
		for _, m := range p.Status.ExtendedResourceClaimStatus.RequestMappings {
			out[m.ContainerName] = append(out[m.ContainerName], claimUse{p.Status.ExtendedResourceClaimStatus.ResourceClaimName, m.RequestName})
		}
	}
	return out
}

// checkContainer compares what the fake runtime resolved through CDI with
// what a container of each of its devices' vendor needs: only its own
// devices where it names one request of a claim.
func checkContainer(t *testing.T, g got) {
	t.Helper()
	for _, ctr := range g.placement.Containers {
		checkContainerDevices(t, g, ctr, g.byContainer[ctr.ContainerName])
	}
}

func checkContainerDevices(t *testing.T, g got, ctr *record.Container, devices []resourceapi.Device) {
	t.Helper()
	var nvWhole, nvParts, amd int
	var uuids []string
	for _, d := range devices {
		switch {
		case str(d, "vendor") == "amd":
			amd++
		case str(d, "type") == "partition":
			nvParts++
			uuid := str(d, "uuid")
			if uuid == "" {
				// A dynamic placement: its partition exists only since prepare.
				uuid = carvedUUID(t, g.placement.Node, d)
			}
			uuids = append(uuids, uuid)
		default:
			nvWhole++
			uuids = append(uuids, str(d, "uuid"))
		}
	}
	nv := nvWhole + nvParts
	{
		count := map[*regexp.Regexp]int{}
		has := map[string]bool{}
		for _, dn := range ctr.Devices {
			has[dn.Path] = true
			for _, re := range []*regexp.Regexp{nvidiaGPU, migCap, render, card} {
				if re.MatchString(dn.Path) {
					count[re]++
				}
			}
			if dn.Type != "c" {
				t.Errorf("container %s: %s is %q, want a character device", ctr.ContainerName, dn.Path, dn.Type)
			}
		}
		if count[nvidiaGPU] != nv || count[migCap] != 2*nvParts || count[render] != amd || count[card] != amd {
			t.Errorf("container %s devices %v: want %d GPU nodes, %d MIG caps, %d render and card nodes", ctr.ContainerName, ctr.DevicePaths(), nv, 2*nvParts, amd)
		}
		for _, common := range []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} {
			if has[common] != (nv > 0) {
				t.Errorf("container %s: %s present=%v with %d NVIDIA devices", ctr.ContainerName, common, has[common], nv)
			}
		}
		if has["/dev/kfd"] != (amd > 0) {
			t.Errorf("container %s: /dev/kfd present=%v with %d AMD devices", ctr.ContainerName, has["/dev/kfd"], amd)
		}
		env, _ := ctr.Getenv("NVIDIA_VISIBLE_DEVICES")
		if got, want := sortedCSV(env), sortedCSV(strings.Join(uuids, ",")); got != want {
			t.Errorf("container %s: NVIDIA_VISIBLE_DEVICES=%q, want %q", ctr.ContainerName, got, want)
		}
	}
}

func sortedCSV(s string) string {
	if s == "" {
		return ""
	}
	p := strings.Split(s, ",")
	sort.Strings(p)
	return strings.Join(p, ",")
}
