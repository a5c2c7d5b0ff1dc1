// Package schedbench measures the real kube-scheduler placing pods with
// claims on a fleet larger than the local cluster: N nodes that exist only
// as Node objects with the ResourceSlices Tessera publishes for a simulated
// machine (no kubelets: nothing runs, pods stay bound), pods created at a
// fixed rate, each with its own claim. It reports pods scheduled per second
// and the time from a pod's creation to its binding.
package schedbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// Layout is one way nodes are published and the claim its pods make.
type Layout struct {
	Name    string
	Profile string
	Options publish.Options
	Claim   resourceapi.ExactDeviceRequest
	// NVIDIA: the node publishes what the NVIDIA DRA driver publishes for
	// the machine with DynamicMIG (alloctest.NVIDIALayout, the reference
	// of the allocator benchmarks), and the run creates its DeviceClasses.
	NVIDIA bool
}

func cel(class, expr string) resourceapi.ExactDeviceRequest {
	return resourceapi.ExactDeviceRequest{DeviceClassName: class, Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}
}

// Layouts are the ways a node publishes: whole H100s, MIG cut by an
// operator beforehand (dgx-h100-mig: nine 1g.10gb instances on GPUs 6 and
// 7, the rest whole; a pod asks a 1g.10gb slice, the reference a dynamic
// node is compared with for the same claim), dynamic MIG (the same claim)
// with every placement published (--dynamic-window=0) and with the agent's
// default window of 2 on a node where it never ran, and capacity shares of
// L4s (7Gi each). The AMD ones are an MI300X platform (mi300x-8): whole
// GPUs as an operator leaves them (the catalogue has no machine an
// operator set to CPX, so a pod asks a whole MI300X), and compute
// partitions carved on demand, a pod asking one CPX partition through the
// xcp class as docs/claims.md writes it, with every mode's partitions
// published and with the window of 2.
var Layouts = []Layout{
	{Name: "static", Profile: "dgx-h100", Options: publish.Options{Partitioning: publish.Static}, Claim: cel("nvidia.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "H100"`)},
	{Name: "static-mig", Profile: "dgx-h100-mig", Options: publish.Options{Partitioning: publish.Static}, Claim: cel("mig.gpu.tessera.dev", oneG10GB)},
	{Name: "dynamic", Profile: "dgx-h100", Options: publish.Options{Partitioning: publish.Dynamic}, Claim: cel("mig.gpu.tessera.dev", oneG10GB)},
	{Name: "dynamic-window", Profile: "dgx-h100", Options: publish.Options{Partitioning: publish.Dynamic, Window: 2, Open: func(string) bool { return false }}, Claim: cel("mig.gpu.tessera.dev", oneG10GB)},
	{Name: "nvidia-dynamic", Profile: "dgx-h100", NVIDIA: true, Claim: cel("mig.nvidia.com", `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`)},
	{Name: "shared", Profile: "l4-4", Options: publish.Options{Partitioning: publish.Static, Sharing: publish.SharingCapacity}, Claim: func() resourceapi.ExactDeviceRequest {
		r := cel("nvidia.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "L4"`)
		r.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("7Gi")}}
		return r
	}()},
	{Name: "amd-static", Profile: "mi300x-8", Options: publish.Options{Partitioning: publish.Static}, Claim: cel("amd.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "MI300X"`)},
	{Name: "amd-dynamic", Profile: "mi300x-8", Options: publish.Options{Partitioning: publish.Dynamic}, Claim: cel("xcp.gpu.tessera.dev", cpxOfMI300X)},
	{Name: "amd-dynamic-window", Profile: "mi300x-8", Options: publish.Options{Partitioning: publish.Dynamic, Window: 2, Open: func(string) bool { return false }}, Claim: cel("xcp.gpu.tessera.dev", cpxOfMI300X)},
}

// oneG10GB asks a 1g.10gb MIG slice.
const oneG10GB = `device.attributes["gpu.tessera.dev"].profile == "1g.10gb"`

// cpxOfMI300X asks one CPX compute partition of an MI300X (docs/claims.md).
const cpxOfMI300X = `device.attributes["gpu.tessera.dev"].profile == "CPX" && device.attributes["gpu.tessera.dev"].model == "MI300X"`

// Result is one run's figures.
type Result struct {
	Layout        string
	Nodes, Pods   int
	Scheduled     int
	PodsPerSecond float64
	// CreatedPerSecond is the rate pods were really created at: pods/s
	// close to it says the scheduler kept up.
	CreatedPerSecond float64
	P50, P99, Max    time.Duration
	SetupTook        time.Duration
}

const namespace = "schedbench"

// Run creates nodes and slices for l, then pods at rate per second, and
// waits (up to timeout) until every pod is bound. started, when set, is
// called as the first pod is created (a profiler's cue).
func Run(ctx context.Context, client kubernetes.Interface, l Layout, nodes, pods int, rate float64, timeout time.Duration, started func()) (*Result, error) {
	setup := time.Now()
	objs, err := template(ctx, l)
	if err != nil {
		return nil, err
	}
	if err := makeNodes(ctx, client, l, objs, nodes); err != nil {
		return nil, err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	if err := waitServiceAccount(ctx, client); err != nil {
		return nil, err
	}
	if err := createClasses(ctx, client, l); err != nil {
		return nil, err
	}
	res := &Result{Layout: l.Name, Nodes: nodes, Pods: pods, SetupTook: time.Since(setup)}

	w, err := watchPods(ctx, client)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	bound := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			mu.Lock()
			if _, seen := bound[p.Name]; !seen {
				bound[p.Name] = time.Now()
			}
			n := len(bound)
			mu.Unlock()
			if n == pods {
				return
			}
		}
	}()

	if started != nil {
		started()
	}
	start := time.Now()
	err = createPods(ctx, client, l, pods, rate, func(name string) {
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	res.CreatedPerSecond = float64(pods) / time.Since(start).Seconds()
	select {
	case <-done:
	case <-time.After(timeout):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	last := start
	for name, t := range bound {
		if c, ok := created[name]; ok {
			lat = append(lat, t.Sub(c))
		}
		if t.After(last) {
			last = t
		}
	}
	res.Scheduled = len(lat)
	if len(lat) == 0 {
		return res, fmt.Errorf("no pod was scheduled within %s", timeout)
	}
	slices.Sort(lat)
	res.P50, res.P99, res.Max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	res.PodsPerSecond = float64(len(lat)) / last.Sub(start).Seconds()
	return res, nil
}

// watchPods watches the benchmark's pods from now on, watching again where
// the server ends a watch: under a burst of creates on this machine the API
// server closed the plain watch within seconds, and the run counted only
// the pods bound before.
func watchPods(ctx context.Context, client kubernetes.Interface) (watch.Interface, error) {
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("pods: %w", err)
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return client.CoreV1().Pods(namespace).Watch(ctx, o)
	}}
	return watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
}

// template builds one node's slices for l exactly as the agent would.
func template(ctx context.Context, l Layout) ([]*resourceapi.ResourceSlice, error) {
	m, err := sim.Profile(l.Profile, "template")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "schedbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b, err := sim.New(m, dir, sim.WithBootID("schedbench"))
	if err != nil {
		return nil, err
	}
	inv, err := b.Discover(ctx)
	if err != nil {
		return nil, err
	}
	if l.NVIDIA {
		return alloctest.NVIDIALayout("template", inv)
	}
	res, err := publish.Build("template", inv, l.Options)
	if err != nil {
		return nil, err
	}
	return publish.Objects(names.DriverName, "template", res.Resources), nil
}

// makeNodes creates the Node objects, with room for every pod, and each
// node's slices, a few creates in flight.
func makeNodes(ctx context.Context, client kubernetes.Interface, l Layout, objs []*resourceapi.ResourceSlice, n int) error {
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("%s-%04d", l.Name, i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- makeNode(ctx, client, name, alloctest.CloneNode(objs, "template", name))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func makeNode(ctx context.Context, client kubernetes.Interface, name string, slices []*resourceapi.ResourceSlice) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	nd, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("250")}
	// The node controllers write the new node too: retry on a conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nd.Status.Capacity, nd.Status.Allocatable = room, room
		nd.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err := client.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{})
		if err != nil {
			if cur, gerr := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); gerr == nil {
				nd = cur
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	for _, s := range slices {
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("node %s slice: %w", name, err)
		}
	}
	return nil
}

// inFlight bounds the creates waiting for the API server: enough that one
// slow round trip does not hold back the pods after it.
const inFlight = 32

// createPods creates pods at rate per second, each at its own tick and not
// after the one before returns: created one by one, a pod and its claim a
// round trip each, the benchmark's own client held a loaded machine to
// about 40 pods/s, and a layout the scheduler kept up with measured the
// creator. created is called as each pod exists.
func createPods(ctx context.Context, client kubernetes.Interface, l Layout, pods int, rate float64, created func(name string)) error {
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, inFlight)
	errs := make(chan error, pods)
	var wg sync.WaitGroup
	for i := range pods {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := createPod(ctx, client, l, name); err != nil {
				errs <- err
				return
			}
			created(name)
		}(fmt.Sprintf("p-%04d", i))
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

// createClasses creates the NVIDIA driver's DeviceClasses for its layout
// (Tessera's come with the cluster's chart).
func createClasses(ctx context.Context, client kubernetes.Interface, l Layout) error {
	if !l.NVIDIA {
		return nil
	}
	for _, c := range alloctest.NVIDIAClasses() {
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("device class %s: %w", c.Name, err)
		}
	}
	return nil
}

// createPod creates a pod with its own claim; it tolerates every taint, as
// nodes without kubelets are marked unreachable after a while.
func createPod(ctx context.Context, client kubernetes.Interface, l Layout, name string) error {
	req := l.Claim
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("claim %s: %w", name, err)
	}
	claimName := name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claimName}},
			Tolerations:    []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "work", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("pod %s: %w", name, err)
	}
	return nil
}

func waitServiceAccount(ctx context.Context, client kubernetes.Interface) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
	}
	return fmt.Errorf("no default service account in %s", namespace)
}
