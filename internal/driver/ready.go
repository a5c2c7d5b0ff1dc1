package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Ready reports whether the agent can serve: the kubelet accepted its
// registration, and the API server holds every slice of the node's pool at
// the newest generation with every device the agent publishes. It is what
// the readiness probe asks (/readyz); the API server is asked at most once
// per readyTTL, however often the probe's port is hit.
func (d *Driver) Ready(ctx context.Context) error {
	if d.helper == nil {
		return errors.New("kubelet plugin not started")
	}
	st := d.helper.RegistrationStatus()
	if st == nil {
		return errors.New("not registered with the kubelet yet")
	}
	if !st.PluginRegistered {
		return fmt.Errorf("the kubelet rejected the registration: %s", st.Error)
	}
	return d.readyPool.get(ctx)
}

// poolPublished asks the API server whether the node's pool is published
// whole, as the agent last built it.
func (d *Driver) poolPublished(ctx context.Context) error {
	res := d.Published()
	l, err := nodeSlices(ctx, d.opts)
	if err != nil {
		return err
	}
	pool := publish.Pools(l, names.DriverName)[res.Pool]
	if pool == nil {
		pool = &publish.PoolState{}
	}
	if !pool.Complete() || pool.Devices != len(res.Order) {
		return fmt.Errorf("ResourceSlices not published yet: %d of %d slices, %d of %d devices", pool.Slices, pool.Want, pool.Devices, len(res.Order))
	}
	return nil
}
