package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Client returns an admin client for the cluster.
func (c *Config) Client() (kubernetes.Interface, error) { return c.client() }

func (c *Config) client() (kubernetes.Interface, error) { return c.ClientWithRate(100, 200) }

// ClientWithRate is Client with client-go's rate limit set: a benchmark's
// own setup (thousands of creates) must not wait on it.
func (c *Config) ClientWithRate(qps float32, burst int) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = qps, burst
	return kubernetes.NewForConfig(cfg)
}

func waitAPIServer(ctx context.Context, client kubernetes.Interface, p Proc) error {
	return Poll(ctx, 60*time.Second, func() (bool, string, error) {
		if !alive(p) {
			return false, "", fmt.Errorf("kube-apiserver exited:\n%s", tail(p.Log, 20))
		}
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Sprintf("readyz: %v", err), nil
		}
		return string(body) == "ok", string(body), nil
	})
}

// applyDeviceClasses creates (or replaces) the shipped DeviceClasses.
func (c *Config) applyDeviceClasses(ctx context.Context, client kubernetes.Interface) error {
	data, err := os.ReadFile(c.DeviceClasses)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var dc resourceapi.DeviceClass
		if err := dec.Decode(&dc); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", c.DeviceClasses, err)
		}
		if dc.Name == "" {
			continue
		}
		// The API server may still be installing the resource.k8s.io group.
		err := Poll(ctx, 30*time.Second, func() (bool, string, error) {
			_, err := client.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return true, "", nil
			}
			return err == nil, fmt.Sprint(err), nil
		})
		if err != nil {
			return fmt.Errorf("DeviceClass %s: %w", dc.Name, err)
		}
	}
}

// waitNodes waits for every node to be Ready and to have published a
// complete pool of ResourceSlices.
func (c *Config) waitNodes(ctx context.Context, client kubernetes.Interface, s *State) error {
	return Poll(ctx, 120*time.Second, func() (bool, string, error) {
		for _, p := range s.Procs {
			if !alive(p) {
				return false, "", fmt.Errorf("%s exited:\n%s", p.Name, tail(p.Log, 30))
			}
		}
		var waiting []string
		for _, n := range c.Nodes {
			node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				waiting = append(waiting, n.Name+" not Ready")
				continue
			}
			if ok, msg := PoolPublished(ctx, client, n.Name); !ok {
				waiting = append(waiting, n.Name+": "+msg)
			}
		}
		sort.Strings(waiting)
		return len(waiting) == 0, strings.Join(waiting, "; "), nil
	})
}

// WaitPodsAdmitted waits for what a first pod in namespace needs from the
// control plane: the namespace's default service account (the
// controller-manager creates it; admission refuses a pod without it) and
// the kube-root-ca.crt ConfigMap its token volume projects (the kubelet
// cannot start the pod without it). kind waits for the same.
func WaitPodsAdmitted(ctx context.Context, client kubernetes.Interface, namespace string) error {
	return Poll(ctx, 60*time.Second, func() (bool, string, error) {
		if _, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, "serviceaccount " + namespace + "/default: " + err.Error(), nil
		}
		if _, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			return false, "configmap " + namespace + "/kube-root-ca.crt: " + err.Error(), nil
		}
		return true, "", nil
	})
}

// PoolPublished reports whether node's pool is complete: as many slices of
// the newest generation as the pool says it has.
func PoolPublished(ctx context.Context, client kubernetes.Interface, node string) (bool, string) {
	l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return false, err.Error()
	}
	st := publish.Pools(l.Items, names.DriverName)[node]
	if st == nil || !st.Complete() {
		if st == nil {
			st = &publish.PoolState{}
		}
		return false, fmt.Sprintf("%d of %d slices published", st.Slices, st.Want)
	}
	return true, ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Poll runs cond every 200ms until it is true, it fails, ctx ends or d
// passes; a timeout's error carries cond's last message.
func Poll(ctx context.Context, d time.Duration, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(d)
	var last string
	for {
		ok, msg, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		last = msg
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %s", d, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
