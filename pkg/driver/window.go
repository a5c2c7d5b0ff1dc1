package driver

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/names"
	"github.com/tessera-gpu/tessera/pkg/publish"
)

// followWindow republishes when the claims prepared or unprepared moved the
// placement window: a GPU a claim now holds whole closes (its placements
// cannot be allocated while it is held), and a GPU released opens again if
// the window is short. The build is handed to the kubelet plugin helper,
// whose controller writes the slices in the background, so the call waits
// for the build only; a failure is logged, and the next republish catches
// up.
func (d *Driver) followWindow(ctx context.Context) {
	if d.opts.Partitioning != publish.Dynamic || !publish.WindowMoved(d.Published(), d.opts.DynamicWindow, d.claims.HoldsWhole) {
		return
	}
	if err := d.pub.publish(ctx, heldChanged); err != nil {
		klog.FromContext(ctx).Error(err, "Republish after a GPU was held or released whole")
	}
}

// previouslyOpen reads which dynamic GPUs' placements the node's slices in
// the API server publish, in any generation: the placement window opens
// from them, so a restarted or upgraded agent never drops a placement the
// scheduler may have allocated from its predecessor's slices. An empty map
// is a node that published none; nil (the list failed, or no client) counts
// every GPU as open, which is safe, and the window narrows again as GPUs
// are held whole.
func previouslyOpen(ctx context.Context, o Options) map[string]bool {
	logger := klog.FromContext(ctx)
	if o.KubeClient == nil {
		return nil
	}
	l, err := o.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + o.NodeName})
	if err != nil {
		logger.Error(err, "Read the node's published slices; every dynamic GPU's placements stay published until one is held whole")
		return nil
	}
	open := map[string]bool{}
	for _, s := range l.Items {
		if s.Spec.Driver != names.DriverName || s.Spec.Pool.Name != o.NodeName {
			continue
		}
		for _, d := range s.Spec.Devices {
			if gpu, ok := names.ParentGPU(d.Name); ok && gpu != d.Name {
				open[gpu] = true
			}
		}
	}
	return open
}
