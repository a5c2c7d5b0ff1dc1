// Package claims is Tessera's one prepare state machine: it turns a claim's
// allocation into CDI device IDs and undoes that on unprepare, so that a crash
// at any point leaves the claim either prepared exactly once or cleanly absent.
//
// Each claim moves through the checkpoint as
//
//	(absent) -> PrepareStarted -> PrepareCompleted -> UnprepareStarted -> (absent)
//
// and, for a claim that changes the node (a partition to carve, MIG mode to
// switch, an interval, an MPS daemon), every transition is saved before the
// work it announces:
//
//	prepare:   save PrepareStarted (devices chosen) -> carve, apply sharing
//	           -> write CDI spec -> save PrepareCompleted
//	unprepare: save UnprepareStarted -> remove CDI spec, daemon, partitions
//	           -> delete entry
//
// A claim that needs nothing but its CDI spec saves no intent (one
// checkpoint write per prepare or unprepare instead of two): its entry is
// held in memory while the spec is written, then saved PrepareCompleted; on
// unprepare the spec goes, then the entry. A crash can then leave only a
// spec no entry names (the start-up sweep removes it) or a completed entry
// whose spec is gone (the kubelet's retried call rewrites or removes it).
//
// On start, Recover rolls PrepareStarted claims back (remove their spec and any
// partition they created) and UnprepareStarted claims forward; the kubelet
// retries the prepare, which then runs from a clean state. A corrupt
// checkpoint is moved aside and rebuilt from the claim specs on disk.
//
// Concurrency: operations on one claim are serialised (by UID); plain
// claims hold the state lock only to check and record and run in parallel;
// claims with side effects hold it throughout. Checkpoint writes are group
// commits of the newest state (commit.go).
//
// With dynamic partitioning (Config.Partitioning) prepare also carves the
// allocated MIG placements between PrepareStarted and the spec, and
// unprepare destroys them: carve.go (carving and the records that make it
// crash-safe), release.go (destroying and turning MIG mode back off),
// sweep.go (partitions no claim holds: destroyed at start and on retry,
// and Holds, which the driver publishes with).
package claims
