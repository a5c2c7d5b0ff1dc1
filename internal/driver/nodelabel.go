package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
)

// The agent labels its node with the multi-node NVLink domain its GPUs
// belong to (names.NodeLabelFabricDomain), so that the scheduler's
// topology-aware placement of a pod group can keep the group inside one
// domain. The chart's admission policy lets an agent's token change that
// label, on its own node, and nothing else of any node.

// nodeLabeler keeps the label equal to the domain of the inventory
// discovered last. It is called by the one caller that runs publishes.
type nodeLabeler struct {
	client kubernetes.Interface
	node   string
	// imexAddress, where set, is the node's IMEX address
	// (--imex-address), annotated beside the label
	// (names.NodeAnnotationIMEXAddress) while the node is in a domain.
	imexAddress string
	// applied is the value on the node ("" for none) once a patch went
	// through; unknown until the first.
	applied *string
	// warned is the inventory's domains last warned about (several).
	warned string
	// failed is set while the last patch failed (the node not registered
	// yet, the API server away): retryLabel tries again.
	failed atomic.Bool
}

// pending reports whether the label still waits for a patch that failed.
func (l *nodeLabeler) pending() bool { return l != nil && l.failed.Load() }

// fabricDomain is the one domain all of inv's GPUs that have one name, ""
// where none has one; several is set where they name more than one (a
// node wired to two domains, or a misconfigured one), which gets no label.
func fabricDomain(inv *inventory.Node) (domain string, several []string) {
	var seen []string
	for i := range inv.GPUs {
		if d := inv.GPUs[i].FabricDomain; d != "" && !slices.Contains(seen, d) {
			seen = append(seen, d)
		}
	}
	switch len(seen) {
	case 0:
		return "", nil
	case 1:
		return seen[0], nil
	}
	slices.Sort(seen)
	return "", seen
}

// sync sets or removes the label where the node does not show inv's
// domain yet. A failure is returned and tried again at the next publish.
func (l *nodeLabeler) sync(ctx context.Context, inv *inventory.Node) error {
	if l == nil || l.client == nil || inv == nil {
		return nil
	}
	want, several := fabricDomain(inv)
	if several != nil {
		if key := fmt.Sprint(several); key != l.warned {
			l.warned = key
			klog.FromContext(ctx).Info("Warning: the node's GPUs name several multi-node NVLink domains; the node gets no domain label", "domains", several, "label", names.NodeLabelFabricDomain)
		}
	}
	key := want
	if want != "" && l.imexAddress != "" {
		key += " " + l.imexAddress
	}
	if l.applied != nil && *l.applied == key {
		return nil
	}
	var value, address any // JSON null removes them
	if want != "" {
		value = want
		if l.imexAddress != "" {
			address = l.imexAddress
		}
	}
	meta := map[string]any{"labels": map[string]any{names.NodeLabelFabricDomain: value}}
	if l.imexAddress != "" {
		meta["annotations"] = map[string]any{names.NodeAnnotationIMEXAddress: address}
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	if _, err := l.client.CoreV1().Nodes().Patch(ctx, l.node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: names.DriverName}); err != nil {
		l.failed.Store(true)
		return fmt.Errorf("label node %s %s=%q: %w", l.node, names.NodeLabelFabricDomain, want, err)
	}
	l.failed.Store(false)
	l.applied = &key
	klog.FromContext(ctx).V(2).Info("Node labelled with its fabric domain", "label", names.NodeLabelFabricDomain, "domain", want, "imexAddress", l.imexAddress)
	return nil
}

// retryLabel republishes, every so often, while the node's label waits for
// a patch that failed: an agent that starts before its kubelet registered
// the node, or while the API server is away, labels it once it can, with
// nothing else to republish for.
func (d *Driver) retryLabel(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if !d.pub.labeler.pending() {
			return
		}
		if err := d.pub.publish(ctx, unchanged); err != nil {
			klog.FromContext(ctx).Error(err, "Republish to label the node")
		}
	}, every)
}
