package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/tessera-gpu/tessera/internal/names"
)

// PluginOptions name the node's kubelet plugin.
type PluginOptions struct {
	NodeName      string
	KubeClient    kubernetes.Interface
	PluginDataDir string
	RegistrarDir  string
	// PodUID, when set, registers the plugin under a name of this pod's
	// (the helper's RollingUpdate), so that a new agent's pod registers
	// beside the old one's during a rolling update with surge.
	PodUID string
	// DeviceMetadata has the helper write each prepared device's
	// metadata (KEP-5304) and its CDI spec, into CDIDir.
	DeviceMetadata bool
	CDIDir         string
}

// startPlugin registers plugin with the kubelet as o names it.
func startPlugin(ctx context.Context, plugin kubeletplugin.DRAPlugin, o PluginOptions) (*kubeletplugin.Helper, error) {
	for _, dir := range []string{o.PluginDataDir, o.RegistrarDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("start kubelet plugin: %w", err)
		}
	}
	helper, err := kubeletplugin.Start(ctx, plugin, helperOptions(o)...)
	if err != nil {
		return nil, fmt.Errorf("start kubelet plugin: %w", err)
	}
	return helper, nil
}

// helperOptions are the kubelet plugin helper's options for o.
func helperOptions(o PluginOptions) []kubeletplugin.Option {
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(names.DriverName),
		kubeletplugin.NodeName(o.NodeName),
		kubeletplugin.KubeClient(o.KubeClient),
		kubeletplugin.PluginDataDirectoryPath(o.PluginDataDir),
		kubeletplugin.RegistrarDirectoryPath(o.RegistrarDir),
		// The claims manager serialises what must be (per claim, and
		// claims with side effects on the node); the rest, and the helper's
		// claim GETs, run in parallel. Across two agents of a node, the
		// node's lock (internal/handover) lets only one act.
		kubeletplugin.Serialize(false),
	}
	if o.PodUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(socketUID(o.PodUID))))
	}
	if o.DeviceMetadata {
		// v1beta1 only, the latest (the helper refuses to start without
		// it): v1alpha1 readers (KubeVirt before 1.8) are not served.
		opts = append(opts, kubeletplugin.EnableDeviceMetadata(true, []schema.GroupVersion{metadatav1beta1.SchemeGroupVersion}),
			kubeletplugin.CDIDirectory(o.CDIDir))
	}
	return opts
}

// socketUID is what names this pod's sockets: a hash of its UID, unique
// between the two agents of a node. Not the UID itself: the helper admits
// a registration socket path of 108 bytes, one more than a unix socket
// address holds with its terminating NUL, and under a kubelet root longer
// than /var/lib/kubelet the UID's name reaches exactly that.
func socketUID(podUID string) string {
	sum := sha256.Sum256([]byte(podUID))
	return hex.EncodeToString(sum[:8])
}
