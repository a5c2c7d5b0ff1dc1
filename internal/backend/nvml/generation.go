//go:build cgo && linux

package nvml

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Generation implements backend.Generationer. The agent polls it (every 5 s
// by default) and rediscovers when it moves, so it must see what changes
// the published devices: this agent's partition and mode calls (counted,
// failed ones too) and changes made outside it, such as `nvidia-smi mig
// -cgi ... -C` or a MIG mode switch. For the latter it reads each GPU's MIG
// mode and the UUIDs of its MIG devices: the devices Discover publishes
// are exactly those (a GPU instance without a compute instance has no MIG
// device and is not published). That is at most 2 + 2*7 cheap NVML calls
// per MIG GPU and one per other GPU, instead of a full Discover.
func (b *Backend) Generation() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return "", errors.New("nvml: backend is closed")
	}
	b.refreshHandles()
	h := fnv.New64a()
	for i, d := range b.handles {
		fmt.Fprintf(h, "%d=%s;", i, migFingerprint(d))
	}
	return fmt.Sprintf("%d-%016x", b.changes, h.Sum64()), nil
}

// migFingerprint is one GPU's MIG state as a string: "-" without a handle,
// "none" without MIG, "off", or "on:" and its MIG device UUIDs. A read
// that fails gives "?" and the error, so a GPU that keeps failing does not
// make every poll look like a change, and its recovery does.
func migFingerprint(d nvml.Device) string {
	if d == nil {
		return "-"
	}
	cur, _, ret := d.GetMigMode()
	if err := check("nvmlDeviceGetMigMode", ret); err != nil {
		if notSupported(err) {
			return "none"
		}
		return "?" + err.Error()
	}
	if cur != nvml.DEVICE_MIG_ENABLE {
		return "off"
	}
	var uuids []string
	err := eachMIGDevice(d, func(_ int, md nvml.Device) error {
		u, ret := md.GetUUID()
		uuids = append(uuids, u)
		return check("nvmlDeviceGetUUID(MIG)", ret)
	})
	if err != nil {
		return "?" + err.Error()
	}
	slices.Sort(uuids)
	return "on:" + strings.Join(uuids, ",")
}
