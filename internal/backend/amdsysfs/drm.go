package amdsysfs

import (
	"fmt"
	"path"
)

// cardMinor finds the /dev/dri/card<N> that belongs with render node
// renderD<render>: both are children of one DRM device, so the card entry
// sits next to the render entry in the device's drm/ directory. That holds
// for the PCI GPU and for the amdgpu_xcp platform devices that carry the
// nodes of compute partitions 1..N-1, which have no PCI directory of their
// own. ok=false when sysfs does not say.
func cardMinor(r fsRoot, render int) (int, bool) {
	rel, err := r.resolve(fmt.Sprintf("sys/class/drm/renderD%d", render))
	if err != nil {
		return 0, false
	}
	cards := r.prefixedIndex(path.Dir(rel), "card")
	if len(cards) != 1 {
		return 0, false
	}
	return cards[0], true
}

// derivedCardMinor is the fallback when sysfs has no DRM entries: DRM
// numbers render nodes from 128 and primary nodes from 0, one each per
// device, so renderD(128+i) pairs with card i. It is DERIVED, and wrong on
// hosts where a device without a render node (a BMC display adapter) took
// card0; it is used only for captures that hold no /sys/class/drm.
func derivedCardMinor(render int) int { return render - 128 }
