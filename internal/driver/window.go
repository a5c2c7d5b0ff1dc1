package driver

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// followWindow republishes at once when a prepared claim holds whole a GPU
// whose placements are published: they can no longer be allocated. The build
// is handed to the kubelet plugin helper, whose controller writes the slices
// in the background, so the call waits for the build only; a failure is
// logged, and the next republish catches up. GPUs the window opens wait for
// openWindow.
func (d *Driver) followWindow(ctx context.Context) {
	if d.opts.Partitioning != publish.Dynamic || d.opts.DynamicWindow <= 0 || !publish.WindowCloses(d.Published(), d.claims.HoldsWhole) {
		return
	}
	if err := d.pub.publish(ctx, heldChanged); err != nil {
		klog.FromContext(ctx).Error(err, "Republish after a GPU was held whole")
	}
}

// openWindow republishes with the GPUs the window opens, if any: after a
// carve or a whole GPU's hold closed or touched an open one, or a release
// while the window was short. The inventory watch calls it on every tick.
// It waits until the API server holds the slices sent last, so that the
// opening reaches the resourceslice controller as a change of its own: two
// slices changed in one sync would have it write every slice of the pool
// again.
func (d *Driver) openWindow(ctx context.Context) error {
	res := d.Published()
	if d.opts.Partitioning != publish.Dynamic || !publish.WindowMoved(res, d.opts.DynamicWindow, d.claims.HoldsWhole) {
		return nil
	}
	if synced, err := d.apiHolds(ctx, res); err != nil || !synced {
		return err
	}
	return d.pub.publish(ctx, windowOpen)
}

// apiHolds reports whether the newest generation of the node's pool in the
// API server publishes exactly res's devices.
func (d *Driver) apiHolds(ctx context.Context, res *publish.Result) (bool, error) {
	if d.opts.KubeClient == nil {
		return true, nil
	}
	l, err := nodeSlices(ctx, d.opts)
	if err != nil {
		return false, err
	}
	pool := publish.Pools(l, names.DriverName)[res.Pool]
	if pool == nil {
		return false, nil
	}
	published := sets.New[string]()
	for _, s := range l {
		if s.Spec.Driver == names.DriverName && s.Spec.Pool.Name == res.Pool && s.Spec.Pool.Generation == pool.Generation {
			for _, dev := range s.Spec.Devices {
				published.Insert(dev.Name)
			}
		}
	}
	return published.Len() == len(res.Order) && published.HasAll(res.Order...), nil
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
	l, err := nodeSlices(ctx, o)
	if err != nil {
		logger.Error(err, "Read the node's published slices; every dynamic GPU's placements stay published until one is held whole")
		return nil
	}
	open := map[string]bool{}
	for _, s := range l {
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

// nodeSlices lists the ResourceSlices of o's node in the API server.
func nodeSlices(ctx context.Context, o Options) ([]resourceapi.ResourceSlice, error) {
	l, err := o.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + o.NodeName})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	return l.Items, nil
}
