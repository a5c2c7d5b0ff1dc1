package preparebench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// Namespace holds the harness's claims. Each plugin under test gets a
// node of its own (NodePrefix and its index), which exists as an object
// only: the plugin is its kubelet plugin.
const (
	Namespace  = "prepare-bench"
	NodePrefix = "prepare-bench-"
)

// Result is one driver's figures, medians over rounds.
type Result struct {
	Label string
	// PrepareP50 and UnprepareP50: one claim at a time. GetP50 is a GET
	// of the claim by the harness just before each sequential prepare, in
	// the driver's own content type (Driver.ContentType): what its kubelet
	// plugin helper spends of a prepare on reading the claim.
	PrepareP50, UnprepareP50, GetP50 time.Duration
	// PrepareRate and UnprepareRate: claims per second with InFlight calls
	// in flight.
	PrepareRate, UnprepareRate float64
	// With a readiness flood: /readyz requests answered per second while
	// the plugin was measured, and requests that got no answer.
	ReadyzRate   float64
	ReadyzFailed int64
}

// Run starts every driver's plugin, each in a directory of its own under
// dir (its log in plugin.log there) and for a node of its own, against the
// API server behind client and kubeconfig; measures them round by round,
// each driver in turn within a round so that a machine that speeds up or
// slows down over the run affects all alike; and stops them.
func Run(ctx context.Context, client kubernetes.Interface, kubeconfig, dir string, drivers []Driver, o Options) ([]*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := ensureNamespace(ctx, client); err != nil {
		return nil, err
	}
	benches := make([]*bench, len(drivers))
	for i, d := range drivers {
		b, stop, err := startDriver(ctx, client, kubeconfig, filepath.Join(dir, fmt.Sprintf("%d-%s", i, d.Label)), fmt.Sprint(NodePrefix, i), d, o)
		if err != nil {
			return nil, err
		}
		defer stop()
		benches[i] = b
	}
	type samples struct {
		prep, unprep, get    []time.Duration
		prepRate, unprepRate []float64
	}
	all := make([]samples, len(drivers))
	floods := make([]*flood, len(drivers))
	for i, d := range drivers {
		if d.ReadyzFlood > 0 {
			floods[i] = &flood{url: d.ReadyzURL, n: d.ReadyzFlood, perSecond: d.ReadyzPerSecond}
		}
	}
	defer func() { // on an error mid-round
		for _, f := range floods {
			if f != nil && f.cancel != nil {
				f.cancel()
			}
		}
	}()
	for r := range o.Rounds {
		for i, b := range benches {
			d := drivers[i]
			if f := floods[i]; f != nil {
				f.start(ctx)
			}
			p, u, g, err := b.sequential(ctx, fmt.Sprintf("%d-%s-r%d-s", i, d.Label, r), o.Sequential)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.Label, err)
			}
			pr, ur, err := b.waves(ctx, fmt.Sprintf("%d-%s-r%d-w", i, d.Label, r), o.Waves, o.InFlight)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.Label, err)
			}
			if f := floods[i]; f != nil {
				f.stop()
			}
			s := &all[i]
			s.prep, s.unprep, s.get = append(s.prep, p), append(s.unprep, u), append(s.get, g)
			s.prepRate, s.unprepRate = append(s.prepRate, pr), append(s.unprepRate, ur)
		}
	}
	out := make([]*Result, len(drivers))
	for i, s := range all {
		out[i] = &Result{Label: drivers[i].Label,
			PrepareP50: median(s.prep), UnprepareP50: median(s.unprep), GetP50: median(s.get),
			PrepareRate: median(s.prepRate), UnprepareRate: median(s.unprepRate)}
		if f := floods[i]; f != nil {
			out[i].ReadyzRate, out[i].ReadyzFailed = f.rate(), f.failed.Load()
		}
	}
	return out, nil
}

// startDriver starts d's plugin in dir for node and waits until it serves.
func startDriver(ctx context.Context, client kubernetes.Interface, kubeconfig, dir, node string, d Driver, o Options) (*bench, func(), error) {
	runDir, err := runtimeDir(dir)
	if err != nil {
		return nil, nil, err
	}
	// What a kubelet's node has before any plugin starts.
	for _, sub := range []string{filepath.Join(dir, "registry"), filepath.Join(dir, "plugins"), filepath.Join(runDir, "cdi")} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return nil, nil, err
		}
	}
	// Unschedulable: in a cluster with kubelets (the e2e suite's) no pod
	// may land on a node that has none.
	_, err = client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: v1.NodeSpec{Unschedulable: true}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("node %s: %w", node, err)
	}
	argv, socket := d.Args(node, kubeconfig, dir, runDir)
	logPath := filepath.Join(dir, "plugin.log")
	stopProc, err := start(argv, logPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", d.Label, err)
	}
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	stop := func() {
		if conn != nil {
			conn.Close()
		}
		stopProc()
		os.RemoveAll(runDir)
		// Its slices go with it (owned by the node).
		_ = client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	devices, err := waitReady(ctx, client, d.DriverName, node, socket, o.InFlight)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("%s (log %s): %w", d.Label, logPath, err)
	}
	getter, err := getClient(kubeconfig, d.ContentType)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &bench{client: client, getter: getter, dra: drapb.NewDRAPluginClient(conn), driver: d.DriverName, node: node, devices: devices}, stop, nil
}

// getClient is the client the harness GETs claims with for a driver: its
// content type, no rate limit of its own.
func getClient(kubeconfig, contentType string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 5000, 10000
	if contentType != "" {
		cfg.ContentType = contentType
		cfg.AcceptContentTypes = contentType + "," + runtime.ContentTypeJSON
	}
	return kubernetes.NewForConfig(cfg)
}

// runtimeDir makes a directory on tmpfs for what a node keeps under
// /var/run (CDI specs: nothing there survives a reboot, and writes to it
// cost no disk flush), or under dir where the machine has no /dev/shm.
func runtimeDir(dir string) (string, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic {
		return os.MkdirTemp("/dev/shm", "prepare-bench-")
	}
	return os.MkdirTemp(dir, "run-")
}

const tmpfsMagic = 0x01021994

func ensureNamespace(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", Namespace, err)
	}
	return nil
}

// start runs argv with its output in logPath; stop ends it (SIGTERM, then
// SIGKILL after 10 s) and waits for it.
func start(argv []string, logPath string) (stop func(), err error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	}, nil
}

// waitReady waits for the plugin's socket and for its slices on node, and
// returns its first n devices in the order the allocator scans them.
func waitReady(ctx context.Context, client kubernetes.Interface, driver, node, socket string, n int) ([]string, error) {
	var devices []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := os.Stat(socket); err != nil {
			return false, nil
		}
		l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + driver + ",spec.nodeName=" + node})
		if err != nil {
			return false, nil
		}
		items := l.Items
		slices.SortFunc(items, func(a, b resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
		devices = devices[:0]
		for _, s := range items {
			for _, d := range s.Spec.Devices {
				devices = append(devices, d.Name)
			}
		}
		return len(devices) >= n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("socket %s and %d devices of %s on node %s: %w (have %v)", socket, n, driver, node, err, devices)
	}
	return devices[:n], nil
}

type bench struct {
	client  kubernetes.Interface
	getter  kubernetes.Interface // the claim GET, as the driver makes it
	dra     drapb.DRAPluginClient
	driver  string
	node    string
	devices []string
}

// claim creates an allocated claim for device and returns its reference.
func (b *bench) claim(ctx context.Context, name, device string) (*drapb.Claim, error) {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "prepare-bench", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
	c, err := b.client.ResourceV1().ResourceClaims(Namespace).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create claim %s: %w", name, err)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: b.driver, Pool: b.node, Device: device}}},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{b.node},
		}}}}},
	}
	if c, err = b.client.ResourceV1().ResourceClaims(Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("allocate claim %s: %w", name, err)
	}
	return &drapb.Claim{Namespace: Namespace, Name: name, Uid: string(c.UID)}, nil
}

func (b *bench) prepare(ctx context.Context, c *drapb.Claim) (time.Duration, error) {
	t0 := time.Now()
	resp, err := b.dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{c}})
	took := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("prepare %s: %w", c.Name, err)
	}
	if r := resp.Claims[c.Uid]; r == nil || r.Error != "" || len(r.Devices) == 0 {
		return 0, fmt.Errorf("prepare %s: %v", c.Name, r)
	}
	return took, nil
}

func (b *bench) unprepare(ctx context.Context, c *drapb.Claim) (time.Duration, error) {
	t0 := time.Now()
	resp, err := b.dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{c}})
	took := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("unprepare %s: %w", c.Name, err)
	}
	if r := resp.Claims[c.Uid]; r == nil || r.Error != "" {
		return 0, fmt.Errorf("unprepare %s: %v", c.Name, r)
	}
	return took, nil
}

// sequential prepares and unprepares n claims of the first device one
// after the other and returns the medians of prepare, unprepare and of a
// GET of the claim.
func (b *bench) sequential(ctx context.Context, prefix string, n int) (time.Duration, time.Duration, time.Duration, error) {
	claims := make([]*drapb.Claim, n)
	for i := range claims {
		c, err := b.claim(ctx, fmt.Sprintf("%s-%d", prefix, i), b.devices[0])
		if err != nil {
			return 0, 0, 0, err
		}
		claims[i] = c
	}
	var prep, unprep, get []time.Duration
	for _, c := range claims {
		t0 := time.Now()
		if _, err := b.getter.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{}); err != nil {
			return 0, 0, 0, err
		}
		get = append(get, time.Since(t0))
		p, err := b.prepare(ctx, c)
		if err != nil {
			return 0, 0, 0, err
		}
		u, err := b.unprepare(ctx, c)
		if err != nil {
			return 0, 0, 0, err
		}
		prep, unprep = append(prep, p), append(unprep, u)
	}
	return median(prep), median(unprep), median(get), b.remove(ctx, claims)
}

// waves prepares waves of inFlight claims (one per device, each by its own
// concurrent call), unprepares each wave the same way, and returns claims
// per second of each.
func (b *bench) waves(ctx context.Context, prefix string, waves, inFlight int) (float64, float64, error) {
	claims := make([][]*drapb.Claim, waves)
	for w := range claims {
		for i := range inFlight {
			c, err := b.claim(ctx, fmt.Sprintf("%s-%d-%d", prefix, w, i), b.devices[i])
			if err != nil {
				return 0, 0, err
			}
			claims[w] = append(claims[w], c)
		}
	}
	var prepTook, unprepTook time.Duration
	for _, wave := range claims {
		took, err := concurrently(wave, func(c *drapb.Claim) error { _, err := b.prepare(ctx, c); return err })
		if err != nil {
			return 0, 0, err
		}
		prepTook += took
		if took, err = concurrently(wave, func(c *drapb.Claim) error { _, err := b.unprepare(ctx, c); return err }); err != nil {
			return 0, 0, err
		}
		unprepTook += took
	}
	n := float64(waves * inFlight)
	return n / prepTook.Seconds(), n / unprepTook.Seconds(), b.remove(ctx, slices.Concat(claims...))
}

// concurrently calls f for every claim at once and returns how long they
// took together.
func concurrently(claims []*drapb.Claim, f func(*drapb.Claim) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(claims))
	t0 := time.Now()
	for i, c := range claims {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	return time.Since(t0), errors.Join(errs...)
}

func (b *bench) remove(ctx context.Context, claims []*drapb.Claim) error {
	for _, c := range claims {
		if err := b.client.ResourceV1().ResourceClaims(Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func median[T time.Duration | float64](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
