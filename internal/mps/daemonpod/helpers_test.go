package daemonpod

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

const (
	testNS    = "tessera-system"
	testNode  = "gpu-node-1"
	testImage = "ghcr.io/tessera-gpu/tessera-kubelet-plugin:0.1.0"
	testSA    = "tessera-mps-daemon"
	testRoot  = "/var/run/tessera/mps"
)

// apiServer is a fake clientset that does what the fake leaves out and
// the launcher relies on: a UID and creation time for each created pod,
// the UID precondition of a delete, and (stuck) a kubelet that never
// confirms a deletion.
type apiServer struct {
	*fake.Clientset
	mu      sync.Mutex
	created int
	stuck   bool
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

func newAPI(t *testing.T, objs ...runtime.Object) *apiServer {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	a := &apiServer{Clientset: fake.NewClientset(append([]runtime.Object{node}, objs...)...)}
	a.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pod := action.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		a.mu.Lock()
		a.created++
		n := a.created
		a.mu.Unlock()
		pod.UID = types.UID(fmt.Sprintf("pod-uid-%d", n))
		pod.CreationTimestamp = metav1.NewTime(time.Unix(1_700_000_000+int64(n), 0))
		return false, nil, nil // the tracker stores it
	})
	a.PrependReactor("delete", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		d := action.(clienttesting.DeleteActionImpl)
		obj, err := a.Tracker().Get(podsGVR, d.Namespace, d.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod)
		if pc := d.DeleteOptions.Preconditions; pc != nil && pc.UID != nil && *pc.UID != pod.UID {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), d.Name, fmt.Errorf("precondition UID %s, object UID %s", *pc.UID, pod.UID))
		}
		if a.stuck {
			now := metav1.Now()
			pod = pod.DeepCopy()
			pod.DeletionTimestamp = &now
			return true, nil, a.Tracker().Update(podsGVR, pod, d.Namespace)
		}
		return false, nil, nil
	})
	return a
}

func testConfig(a *apiServer) Config {
	return Config{
		Client: a, Timeout: 300 * time.Millisecond,
		Settings: nodepod.Settings{
			Namespace: testNS, NodeName: testNode, Image: testImage,
			ImagePullPolicy: corev1.PullIfNotPresent, ServiceAccount: testSA,
			PriorityClassName: "system-node-critical",
		},
	}
}

func newLauncher(t *testing.T, c Config) *Launcher {
	t.Helper()
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testCtx(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

func launchOf(id string) mps.Launch {
	dir := testRoot + "/" + id
	return mps.Launch{
		ID:   id,
		Argv: []string{"/usr/local/bin/tessera-sim", "mps-control", "-f"},
		Env: map[string]string{
			"CUDA_VISIBLE_DEVICES":    "GPU-a,GPU-b",
			"CUDA_MPS_PIPE_DIRECTORY": dir + "/pipe",
			"CUDA_MPS_LOG_DIRECTORY":  dir + "/log",
			mps.EnvDaemonID:           id,
		},
		Dir:     dir,
		Output:  dir + "/log/daemon.out",
		Devices: []string{"GPU-a", "GPU-b"},
	}
}

func getPod(t *testing.T, a *apiServer, h mps.Handle) *corev1.Pod {
	t.Helper()
	ns, name, err := splitPod(h)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := a.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// setStatus writes pod's status as the kubelet would.
func setStatus(t *testing.T, a *apiServer, pod *corev1.Pod, st corev1.PodStatus) {
	t.Helper()
	pod = pod.DeepCopy()
	pod.Status = st
	if err := a.Tracker().Update(podsGVR, pod, pod.Namespace); err != nil {
		t.Fatal(err)
	}
}
