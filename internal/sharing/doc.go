// Package sharing decides how each device of a claim is shared: it reads
// the claim's and its classes' opaque gpu.tessera.dev/v1alpha1 configs from
// the allocation, picks the one that applies to each device (claim over
// class, later over earlier, as DRA defines), and checks it against the
// device it landed on (vendor, device type, memory). The result, Settings,
// is what the prepare state machine records in the checkpoint before it
// applies anything, so a crash or an unprepare undoes exactly that.
//
// Decoding and device-independent validation are v1alpha1.Decode's, the
// same the admission webhook runs; what needs the device (MPS on an AMD GPU,
// a pinned-memory limit above the device's memory) is checked here, on the
// node, and fails only that claim.
package sharing
