package sim

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/pci"
	"github.com/tessera-gpu/tessera/internal/vfio"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

// A test stops an agent at a chosen point of a passthrough by holding the
// simulated vfio-pci's bind of one address: while the file
// HoldBindPath(stateDir, addr) exists, a write of addr to
// bus/pci/drivers/vfio-pci/bind waits, with nothing written yet, so the
// agent stays between the host driver's unbind and vfio-pci's bind for
// as long as the test needs (an e2e kills it there). Without the file the
// write goes through at once: the hold is inert unless a test asks.

// holdDir is where hold files live in the state directory.
const holdDir = "faults"

// holdPoll is how often a held write looks whether its file is gone.
const holdPoll = 10 * time.Millisecond

// HoldBindPath is the file that, while it exists, holds vfio-pci's bind of
// the PCI function at addr on the node whose state directory is stateDir.
func HoldBindPath(stateDir, addr string) string {
	if a, err := pci.Normalize(addr); err == nil {
		addr = a
	}
	return filepath.Join(stateDir, holdDir, "hold-bind-"+addr)
}

// heldSysfs is the node's sysfs tree with the test's holds in front of
// its writes.
type heldSysfs struct {
	*simfs.Tree
	stateDir string
	logger   klog.Logger
}

// Write implements vfio.Sysfs: a held bind waits for its file to go,
// then writes. The wait is outside the tree's lock, so reads of the tree
// (Discover, the test's) go on meanwhile. vfio.Sysfs's Write takes no
// context: a held write ends when the file goes or the process does.
func (h heldSysfs) Write(path, value string) error {
	if filepath.ToSlash(filepath.Clean(path)) == "bus/pci/drivers/"+vfio.Driver+"/bind" {
		h.hold(HoldBindPath(h.stateDir, strings.TrimSpace(value)))
	}
	return h.Tree.Write(path, value)
}

// hold waits while the file at p exists.
func (h heldSysfs) hold(p string) {
	logged := false
	for {
		if _, err := os.Stat(p); err != nil {
			return // gone (or unreadable: a hold never wedges on an error)
		}
		if !logged {
			h.logger.Info("Holding a vfio-pci bind while its hold file exists (tests)", "file", p)
			logged = true
		}
		time.Sleep(holdPoll)
	}
}
