package uninstall

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	imexpod "github.com/tessera-gpu/tessera/internal/imex/daemonpod"
	"github.com/tessera-gpu/tessera/internal/mps/daemonpod"
)

// DaemonSelector selects the daemon pods the agents create: MPS control
// daemons (internal/mps/daemonpod) and IMEX daemons
// (internal/imex/daemonpod).
var DaemonSelector = daemonpod.LabelName + " in (" + daemonpod.AppName + "," + imexpod.AppName + ")"

// Wait deletes the agents' daemon pods in namespace, then waits until every
// pod of the node cleanup DaemonSets is ready (its node is clean) and the
// daemon pods are gone. A cleanup pod that exited with an error (it
// refused, or failed) ends the wait with its node and message. poll is how
// often the objects are read again.
func Wait(ctx context.Context, client kubernetes.Interface, namespace string, daemonSets []string, poll time.Duration) error {
	logger := klog.FromContext(ctx)
	pods := client.CoreV1().Pods(namespace)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: DaemonSelector}); err != nil {
		return fmt.Errorf("delete the daemon pods (%s): %w", DaemonSelector, err)
	}
	var last string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		done, clean, nodes := true, int32(0), int32(0)
		for _, name := range daemonSets {
			ok, ready, desired, err := cleanupDone(ctx, client, namespace, name)
			if err != nil {
				return false, err
			}
			done, clean, nodes = done && ok, clean+ready, nodes+desired
		}
		daemons, err := pods.List(ctx, metav1.ListOptions{LabelSelector: DaemonSelector})
		if err != nil {
			return false, fmt.Errorf("list the daemon pods: %w", err)
		}
		now := fmt.Sprintf("%d of %d nodes clean, %d daemon pods left", clean, nodes, len(daemons.Items))
		if now != last {
			logger.Info("Waiting for the node cleanup", "status", now)
			last = now
		}
		return done && len(daemons.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

// cleanupDone reads one cleanup DaemonSet: done when every pod it should
// run is ready; an error when one of its pods failed.
func cleanupDone(ctx context.Context, client kubernetes.Interface, namespace, name string) (done bool, ready, desired int32, err error) {
	ds, err := client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, 0, 0, fmt.Errorf("the node cleanup DaemonSet %s/%s is gone", namespace, name)
		}
		return false, 0, 0, fmt.Errorf("get DaemonSet %s/%s: %w", namespace, name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return false, 0, 0, fmt.Errorf("DaemonSet %s selector: %w", name, err)
	}
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return false, 0, 0, fmt.Errorf("list the pods of %s: %w", name, err)
	}
	if failed := failures(list.Items); len(failed) > 0 {
		return false, 0, 0, fmt.Errorf("node cleanup failed:\n  %s", strings.Join(failed, "\n  "))
	}
	st := ds.Status
	done = st.ObservedGeneration >= ds.Generation && st.NumberReady == st.DesiredNumberScheduled && st.UpdatedNumberScheduled == st.DesiredNumberScheduled
	return done, st.NumberReady, st.DesiredNumberScheduled, nil
}

// failures: for each cleanup pod whose container exited with an error,
// its node and message.
func failures(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if t != nil && t.ExitCode != 0 {
					out = append(out, fmt.Sprintf("node %s: %s", p.Spec.NodeName, strings.TrimSpace(t.Message)))
					break
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
