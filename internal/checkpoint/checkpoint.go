// Package checkpoint is the on-disk record of the claim prepare state
// machine: which claims the node agent has prepared, or is part way through
// preparing or unpreparing, and with which devices. The agent reads it at
// start to finish or undo what a previous process left half done.
package checkpoint

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// CurrentVersion is the checkpoint format this code writes. Older versions
// are upgraded when read (upgrade.go), so an agent upgrade keeps the claims
// it prepared; a newer or unknown version is treated as corrupt: the agent
// then rebuilds its state from the CDI specs rather than guess at a format
// it does not know.
//
//	1: the first format
//	2: placements with lower-case keys (start, size), like every other field
const CurrentVersion = 2

// State is where a claim is in the prepare state machine.
type State string

const (
	// PrepareStarted: devices may be partly set up (partitions carved, spec
	// written); on recovery, undo them.
	PrepareStarted State = "PrepareStarted"
	// PrepareCompleted: the kubelet has (or will get) the claim's CDI IDs.
	PrepareCompleted State = "PrepareCompleted"
	// UnprepareStarted: teardown began; on recovery, finish it.
	UnprepareStarted State = "UnprepareStarted"
)

func (s State) valid() bool {
	switch s {
	case PrepareStarted, PrepareCompleted, UnprepareStarted:
		return true
	}
	return false
}

// Device is one allocated device of a claim. The file records it as a
// DeviceRecord (record.go), so the types it holds from other packages do
// not decide the format.
type Device struct {
	Request      string
	Pool         string
	Device       string
	CDIDeviceIDs []string
	GPUUUID      string
	// PartitionUUID is set when the device is a partition.
	PartitionUUID string
	// CreatedPartition is true when the agent carved the partition for this
	// claim and so must destroy it on unprepare.
	CreatedPartition bool
	// Profile and Placement say where the partition is (or, before
	// CreatedPartition, is about to be carved): saved before the carve, so
	// a crash between carve and save still finds what to destroy.
	Profile   string
	Placement *inventory.Placement
	// Sharing is what the claim's config asked of this device, saved with
	// PrepareStarted before anything is applied: rollback stops the claim's
	// MPS daemon if any device is under MPS, and gives a GPU its default
	// time-slice back once no claim holds an interval on it.
	Sharing *sharing.Settings
	// ShareID is the allocation's ShareID on a multi-allocatable device
	// (--sharing=capacity): set for a capacity share (whose consumption is
	// in Sharing.Share) and for a claim that consumed the whole device. It
	// goes back to the kubelet with the device.
	ShareID string
	// NCCLTopoFile is set on each device of a claim whose config asked
	// for an NCCL topology file (topology.ncclTopoFile, two or more whole
	// GPUs): the claim's CDI spec mounts the file, and a spec rewritten
	// from the checkpoint (after a reboot) writes it again.
	NCCLTopoFile bool
	// VFIO is set on a whole GPU passed through to a virtual machine
	// (internal/vfio): saved with PrepareStarted, before the first sysfs
	// write, so that rollback gives back whatever was moved.
	VFIO *VFIO
	// AdminAccess is set on a device allocated for DRA admin access (a
	// monitor's claim): the claim gets the device's nodes and nothing
	// else, and holds nothing of it for the agent (no conflict, share,
	// stale-claim release or effect counts it), so its holders prepare and
	// unprepare as if it were not there (internal/claims admin.go).
	AdminAccess bool
}

// VFIO is what passing one GPU through moved: its IOMMU group and the PCI
// functions bound to vfio-pci, each with the driver it goes back to.
type VFIO struct {
	Group     int
	Functions []VFIOFunction
	// Bound is set once every function is on vfio-pci, in the boot the
	// checkpoint names: a reboot gives them back to their drivers, and
	// recovery then clears it (the claim is prepared again, like a
	// partition a reboot took).
	Bound bool
}

// VFIOFunction is one PCI function of a passed GPU's slot: its address and
// the driver it was on ("" for none).
type VFIOFunction struct {
	Address, Driver string
}

// Claim is one claim's entry.
type Claim struct {
	UID       string
	Namespace string
	Name      string
	State     State
	Devices   []Device
	Updated   time.Time
	// Unconfirmed is set on every claim at the first start after a reboot,
	// and on every claim rebuilt from CDI specs, and cleared when the
	// kubelet prepares the claim again, as it does for every pod it runs
	// after its own restart. A claim still unconfirmed when another claim
	// asks for its devices is gone (the scheduler gave the devices away)
	// and yields them.
	Unconfirmed bool
}

// Checkpoint is the whole record, as the agent holds it; the file's own
// types are in record.go.
type Checkpoint struct {
	Version int
	// BootID is the kernel boot ID when the checkpoint was written; a
	// different one at start means a reboot dropped all partitions.
	BootID string
	// Claims is keyed by claim UID.
	Claims map[string]*Claim
	// PartitionModeOn lists the GPUs whose partition (MIG) mode the agent
	// turned on, to turn off again when their last partition goes. Saved
	// before the switch, like a carve.
	PartitionModeOn []string
}

// New returns an empty checkpoint of the current version.
func New() *Checkpoint {
	return &Checkpoint{Version: CurrentVersion, Claims: map[string]*Claim{}}
}

// Clone returns a deep copy, so a caller can keep the last saved state and
// restore it when a save fails.
func (c *Checkpoint) Clone() *Checkpoint {
	if c == nil {
		return nil
	}
	out := *c
	out.PartitionModeOn = slices.Clone(c.PartitionModeOn)
	if c.Claims != nil {
		out.Claims = make(map[string]*Claim, len(c.Claims))
		for uid, cl := range c.Claims {
			out.Claims[uid] = cl.Clone()
		}
	}
	return &out
}

// Clone returns a deep copy of one claim: what the claim manager hands a
// save of the claims that changed (Store.SaveChanges), which then owns it.
func (c *Claim) Clone() *Claim {
	if c == nil {
		return nil
	}
	out := *c
	if c.Devices != nil {
		out.Devices = make([]Device, len(c.Devices))
		for i, d := range c.Devices {
			d.CDIDeviceIDs = slices.Clone(d.CDIDeviceIDs)
			if d.Placement != nil {
				p := *d.Placement
				d.Placement = &p
			}
			if d.Sharing != nil {
				s := *d.Sharing
				if s.Share != nil {
					sh := *s.Share
					s.Share = &sh
				}
				d.Sharing = &s
			}
			if d.VFIO != nil {
				v := *d.VFIO
				v.Functions = slices.Clone(v.Functions)
				d.VFIO = &v
			}
			out.Devices[i] = d
		}
	}
	return &out
}

// valid is what validate checks of one entry, filed under uid.
func (c *Claim) valid(uid string) error {
	switch {
	case c == nil:
		return fmt.Errorf("claim %s: no entry", uid)
	case c.UID != uid:
		return fmt.Errorf("claim %s: filed under UID %q", c.UID, uid)
	case !c.State.valid():
		return fmt.Errorf("claim %s: unknown state %q", uid, c.State)
	}
	return nil
}

// validate checks what Load relies on: every entry present, filed under
// its own UID, in a known state. Save runs it too, so a bad in-memory
// state fails the save instead of producing a file that Load would discard.
func (c *Checkpoint) validate() error {
	for _, uid := range slices.Sorted(maps.Keys(c.Claims)) {
		if err := c.Claims[uid].valid(uid); err != nil {
			return err
		}
	}
	return nil
}
