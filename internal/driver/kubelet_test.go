package driver

import (
	"cmp"
	"context"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/sim/standin/standintest"
)

// node is one simulated node with a running agent, driven over the agent's
// real unix sockets the way the kubelet drives it. The API server is client-go's
// fake clientset: the plugin helper GETs claims from it.
type node struct {
	t       testing.TB
	ctx     context.Context
	cancel  context.CancelFunc
	dir     string
	profile string
	// machine, if set, edits the machine before the simulator starts.
	machine func(*sim.Machine)
	client  *fake.Clientset
	driver  *Driver
	backend *sim.Backend
	// metrics is passed to the agent; nil (most tests) records nothing.
	metrics *metrics.Metrics
	// partitioning is the node's publishing mode (static when empty).
	partitioning publish.Partitioning
	// sharing is the node's --sharing (none when empty).
	sharing publish.Sharing
	// window is the node's --dynamic-window (0: every placement).
	window int
	// reactor, if set, sees every API call first (a fault to inject).
	reactor k8stesting.ReactionFunc
	// poll is Options.InventoryPoll (50ms when zero).
	poll time.Duration
	// orphanRetry is Options.OrphanRetry (50ms when zero).
	orphanRetry time.Duration
	// wrap, if set, wraps the simulated backend the agent is given.
	wrap func(backend.Backend) backend.Backend
	// mps gives the simulator MPS daemons, the test binary as control
	// program (TestMain).
	mps bool
	// limitHook installs a memory limit hook (a stand-in file) and gives
	// the agent the simulator's cgroup tree with it (memlimits_test.go).
	limitHook bool
	// polls counts the agent's inventory polls (polls_test.go); nil where
	// wrap hides the simulator's generation, so the agent does not poll.
	polls *pollCounter
	// passthrough and metadata are Options.Passthrough and
	// Options.DeviceMetadata.
	passthrough, metadata bool
}

func newNode(t *testing.T, profile string) *node { return newBenchNode(t, profile) }

// newMetricsNode is newNode with metrics recorded.
func newMetricsNode(t *testing.T, profile string) *node {
	return newBenchNode(t, profile, metrics.New())
}

func newBenchNode(t testing.TB, profile string, m ...*metrics.Metrics) *node {
	n := &node{profile: profile}
	if len(m) > 0 {
		n.metrics = m[0]
	}
	return launch(t, n)
}

// launch starts n (profile and options set by the caller) with its own
// directory and fake API server, and stops it when the test ends.
func launch(t testing.TB, n *node) *node {
	n.t, n.dir = t, t.TempDir()
	n.client = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}})
	n.client.PrependReactor("create", "*", generateName)
	n.client.PrependReactor("*", "*", resourceVersions())
	if n.reactor != nil {
		n.client.PrependReactor("*", "*", n.reactor)
	}
	n.start()
	// Cleanups run last first: the agent stops, then its daemons.
	t.Cleanup(n.stopDaemons)
	t.Cleanup(n.stop)
	return n
}

// stopDaemons stops the MPS daemons the node's simulator still runs. They
// are detached by design, outliving the agent (a restart adopts them), so
// a test that ends with a claim prepared would otherwise leave them
// running after the test binary exits.
func (n *node) stopDaemons() {
	if !n.mps || n.backend == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	daemons, err := n.backend.MPSDaemons(ctx)
	if err != nil {
		n.t.Errorf("list the node's MPS daemons to stop them: %v", err)
		return
	}
	for _, d := range daemons {
		if err := n.backend.StopMPS(ctx, d.ID); err != nil {
			n.t.Errorf("stop MPS daemon %s: %v", d.ID, err)
		}
	}
}

func (n *node) start() {
	n.t.Helper()
	ctx := testContext(n.t)
	n.ctx, n.cancel = context.WithCancel(ctx)
	m, err := sim.Profile(n.profile, "node-1")
	if err != nil {
		n.t.Fatal(err)
	}
	if n.machine != nil {
		n.machine(m)
	}
	opts := []sim.Option{sim.WithBootID("boot")}
	if n.mps {
		opts = append(opts, sim.WithMPS(filepath.Join(n.dir, "mps"), standintest.Control(n.t)))
	}
	n.backend, err = sim.New(m, filepath.Join(n.dir, "sim"), opts...)
	if err != nil {
		n.t.Fatal(err)
	}
	var b backend.Backend = n.backend
	if n.wrap != nil {
		b = n.wrap(b)
	} else {
		n.polls = &pollCounter{simulator: n.backend}
		b = n.polls
	}
	n.driver, err = New(n.ctx, Options{
		NodeName: "node-1", Backend: b, KubeClient: n.client,
		PluginDataDir: filepath.Join(n.dir, "plugin"), RegistrarDir: filepath.Join(n.dir, "registry"),
		CDIDir: n.cdiDir(), BootID: "boot", InventoryPoll: cmp.Or(n.poll, 50*time.Millisecond),
		Metrics: n.metrics, Partitioning: n.partitioning, Sharing: n.sharing, OrphanRetry: cmp.Or(n.orphanRetry, 50*time.Millisecond),
		Host: n.host(), DynamicWindow: n.window,
		Passthrough: n.passthrough, VFIO: n.backend.PCISysfs(), DeviceMetadata: n.metadata,
	})
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.driver.Start(n.ctx); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) stop() {
	if n.driver != nil {
		n.driver.Stop()
		n.cancel()
		n.driver = nil
	}
}

// generateName gives created objects a name from their generateName, as
// the API server does and the fake clientset does not: without it every
// ResourceSlice of a pool is named "" and all but one are lost.
func generateName(a k8stesting.Action) (bool, runtime.Object, error) {
	obj := a.(k8stesting.CreateAction).GetObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return false, nil, err
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + utilrand.String(5))
	}
	return false, nil, nil
}

// resourceVersions stamps every create and update with a newer
// resourceVersion, as the API server does and client-go's fake does not:
// without them the resourceslice controller's mutation cache cannot tell
// its own update from an older informer event, and writes a slice again.
func resourceVersions() k8stesting.ReactionFunc {
	var rv atomic.Int64
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := a.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		}
		if obj == nil {
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, err
		}
		m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		return false, nil, nil
	}
}

func (n *node) cdiDir() string { return filepath.Join(n.dir, "cdi") }

func (n *node) dial(path string) *grpc.ClientConn {
	n.t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { conn.Close() })
	return conn
}

func (n *node) registration() registerapi.RegistrationClient {
	return registerapi.NewRegistrationClient(n.dial(filepath.Join(n.dir, "registry", names.DriverName+"-reg.sock")))
}

func (n *node) dra() drapbv1.DRAPluginClient {
	return drapbv1.NewDRAPluginClient(n.dial(filepath.Join(n.dir, "plugin", "dra.sock")))
}

func (n *node) health() drahealthv1.DRAResourceHealthClient {
	return drahealthv1.NewDRAResourceHealthClient(n.dial(filepath.Join(n.dir, "plugin", "dra.sock")))
}

// addClaim stores an allocated claim in the API server and returns its kubelet reference.
func (n *node) addClaim(name string, devices ...string) *drapbv1.Claim {
	n.t.Helper()
	return n.addConfiguredClaim(name, "", devices...)
}

// addConfiguredClaim is addClaim with an opaque gpu.tessera.dev config from
// the claim (none when config is empty).
func (n *node) addConfiguredClaim(name, config string, devices ...string) *drapbv1.Claim {
	n.t.Helper()
	return n.addClassClaim(name, "", config, devices...)
}

// addClassClaim is addConfiguredClaim with its request asked of class
// (none when class is empty).
func (n *node) addClassClaim(name, class, config string, devices ...string) *drapbv1.Claim {
	n.t.Helper()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	if class != "" {
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(len(devices))}}}
	}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	if config != "" {
		c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
			Source: resourceapi.AllocationConfigSourceClaim,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: names.DriverName, Parameters: runtime.RawExtension{Raw: []byte(config)},
			}},
		}}
	}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpus", Driver: names.DriverName, Pool: "node-1", Device: d,
		})
	}
	if _, err := n.client.ResourceV1().ResourceClaims("default").Create(n.ctx, c, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
	return &drapbv1.Claim{Namespace: "default", Name: name, Uid: string(c.UID)}
}

func (n *node) prepare(claims ...*drapbv1.Claim) *drapbv1.NodePrepareResourcesResponse {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	resp, err := n.dra().NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: claims})
	if err != nil {
		n.t.Fatalf("NodePrepareResources: %v", err)
	}
	return resp
}

func (n *node) unprepare(claims ...*drapbv1.Claim) *drapbv1.NodeUnprepareResourcesResponse {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	resp, err := n.dra().NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: claims})
	if err != nil {
		n.t.Fatalf("NodeUnprepareResources: %v", err)
	}
	return resp
}

// testContext logs through the test for tests; benchmarks log nothing, so
// that logging does not dominate what they measure.
func testContext(tb testing.TB) context.Context {
	if t, ok := tb.(*testing.T); ok {
		_, ctx := ktesting.NewTestContext(t)
		return ctx
	}
	return klog.NewContext(context.Background(), logr.Discard())
}

// checkpointClaims are the claims the node's checkpoint holds, read from
// its files with the agent's own reader, as an agent after a restart would.
func (n *node) checkpointClaims() map[string]*checkpoint.Claim {
	n.t.Helper()
	cp, err := checkpoint.Read(filepath.Join(n.dir, "plugin", "checkpoint.json"))
	if err != nil {
		n.t.Fatal(err)
	}
	return cp.Claims
}
