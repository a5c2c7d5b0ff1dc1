// Package claims is Tessera's one prepare state machine: it turns a claim's
// allocation into CDI device IDs and undoes that on unprepare, so that a crash
// at any point leaves the claim either prepared exactly once or cleanly absent.
//
// Each claim moves through the checkpoint as
//
//	(absent) -> PrepareStarted -> PrepareCompleted -> UnprepareStarted -> (absent)
//
// and every transition is saved before the work it announces:
//
//	prepare:   save PrepareStarted (devices chosen) -> write CDI spec -> save PrepareCompleted
//	unprepare: save UnprepareStarted -> remove CDI spec -> delete entry
//
// On start, Recover rolls PrepareStarted claims back (remove their spec and any
// partition they created) and UnprepareStarted claims forward; the kubelet
// retries the prepare, which then runs from a clean state. A corrupt
// checkpoint is moved aside and rebuilt from the claim specs on disk.
//
// With dynamic partitioning (Config.Partitioning) prepare also carves the
// allocated MIG placements between PrepareStarted and the spec, and
// unprepare destroys them: carve.go (carving and the records that make it
// crash-safe), release.go (destroying and turning MIG mode back off),
// sweep.go (partitions no claim holds: destroyed at start and on retry,
// and Holds, which the driver publishes with).
package claims
