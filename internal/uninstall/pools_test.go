package uninstall

import (
	"context"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/names"
)

// TestDeleteChannelPools: only the driver's IMEX channel pools go; a
// node's own slices (the kubelet's to remove), another driver's and a
// node pool that happens to start with imex- stay.
func TestDeleteChannelPools(t *testing.T) {
	node := "tray-1"
	slice := func(name, driver, pool string, onNode bool) runtime.Object {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, Pool: resourceapi.ResourcePool{Name: pool, ResourceSliceCount: 1},
		}}
		if onNode {
			s.Spec.NodeName = &node
		}
		return s
	}
	domain := "00000001-0000-0000-0000-000000000001.2"
	client := fake.NewClientset(
		slice("channels-a", names.DriverName, channelpool.PoolName(domain), false),
		slice("channels-b", names.DriverName, channelpool.PoolName("00000001-0000-0000-0000-000000000001.3"), false),
		slice("tray-1-gpus", names.DriverName, node, true),
		slice("odd-node-pool", names.DriverName, channelpool.PoolName(domain), true),
		slice("other-driver", "gpu.example.com", channelpool.PoolName(domain), false),
	)
	if err := DeleteChannelPools(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	l, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range l.Items {
		left = append(left, s.Name)
	}
	slices.Sort(left)
	if want := []string{"odd-node-pool", "other-driver", "tray-1-gpus"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
