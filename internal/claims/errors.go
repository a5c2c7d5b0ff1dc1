package claims

import "errors"

// Kinds of prepare and unprepare failure. Errors from Prepare and Unprepare
// match at most one of them with errors.Is, so callers (metrics, events) can
// classify a failure without reading its message; an error matching none is
// unclassified.
var (
	// ErrNotAllocated: the claim has no allocation.
	ErrNotAllocated = errors.New("claim is not allocated")
	// ErrDeviceNotOnNode: an allocated or recorded device is not published
	// by this node.
	ErrDeviceNotOnNode = errors.New("device not on this node")
	// ErrDeviceInUse: a device, or its GPU or a partition of it, belongs to
	// another prepared claim.
	ErrDeviceInUse = errors.New("device in use")
	// ErrConfigRejected: the allocation carries configuration this driver
	// does not accept.
	ErrConfigRejected = errors.New("configuration rejected")
	// ErrCDI: writing or removing a claim's CDI spec failed.
	ErrCDI = errors.New("CDI spec")
	// ErrCheckpoint: saving the checkpoint failed.
	ErrCheckpoint = errors.New("checkpoint")
	// ErrPartition: carving or destroying a partition, or switching a GPU's
	// partition mode, failed in the backend.
	ErrPartition = errors.New("partition")
	// ErrSharing: setting a time-slice interval or starting or stopping an
	// MPS daemon failed in the backend.
	ErrSharing = errors.New("sharing")
	// ErrPassthrough: a GPU cannot be passed through to a virtual machine
	// (the node, its IOMMU group, what it holds), or binding it to
	// vfio-pci or giving it back to its driver failed.
	ErrPassthrough = errors.New("passthrough")
)

// kindError marks err as one of the kinds above without changing its
// message, which stays the one the user and the logs see.
type kindError struct {
	kind, err error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

func withKind(kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err}
}
