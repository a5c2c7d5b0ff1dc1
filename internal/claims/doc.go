// Package claims is Tessera's one prepare state machine: it turns a claim's
// allocation into CDI device IDs and undoes that on unprepare, so that a crash
// at any point leaves the claim either prepared exactly once or cleanly absent.
//
// Each claim moves through the checkpoint as
//
//	(absent) -> PrepareStarted -> PrepareCompleted -> UnprepareStarted -> (absent)
//
// and, for a claim that changes the node (a partition to carve, MIG mode to
// switch, a GPU to pass through, an interval, an MPS daemon), every
// transition is saved before the work it announces:
//
//	prepare:   save PrepareStarted (devices chosen) -> apply each side
//	           effect -> write CDI spec -> save PrepareCompleted
//	unprepare: save UnprepareStarted -> remove CDI spec -> undo each side
//	           effect -> delete entry
//
// (prepare.go, unprepare.go; recover.go for the start).
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
// A prepare refused because another prepared claim holds one of its
// devices releases that claim (unprepares it, as Unprepare would) when it
// is shown gone: recorded before a reboot and not prepared since, or, on
// one GET of it from the API server made without the state lock, deleted,
// replaced or deallocated (stale.go; docs/operating.md#stale-claims).
//
// A device allocated with adminAccess (a monitor's claim, admin.go) is
// watched, not held: it gets its spec and nothing else, no effect plans for
// it, and none of the checks against other claims counts it.
//
// Concurrency: operations on one claim are serialised (by UID); plain
// claims hold the state lock only to check and record and run in parallel;
// claims with side effects hold it throughout. Checkpoint writes are group
// commits of the newest state (commit.go).
//
// # Side effects
//
// Each kind of change a claim makes to the node beyond its CDI spec is one
// implementation of the effect interface (effect.go), in its own file:
//
//	effect_partitions.go  dynamic partitions: carve at prepare (carve.go),
//	                      destroy at unprepare (release.go), with the MIG
//	                      mode they need; partitions no claim holds go at
//	                      start and on the driver's retry (sweep.go)
//	effect_vfio.go        passthrough: a GPU of the vfio class bound to
//	                      vfio-pci at prepare, given back to its driver at
//	                      unprepare (vfio_check.go refuses what cannot be
//	                      passed; vfio_sweep.go gives back at start what a
//	                      lost record left on no driver)
//	effect_interval.go    time-slice intervals: one per GPU, set at prepare
//	                      and again at start, the default back once no
//	                      claim holds one
//	effect_mps.go         MPS daemons: the claim's own or a device's shared
//	                      one, started after the carve, stopped before the
//	                      partitions go, started again when found dead
//	effect_memlimits.go   kernel memory limits: the hook the spec runs for a
//	                      share the kernel holds; at unprepare, the records
//	                      of containers whose poststop hook never ran go
//
// Prepare, rollback, recovery and the periodic checks know none of them by
// name. They walk the list effects (apply order) and undoOrder (rollback
// order): plan records in the PrepareStarted entry what an effect will do
// (a claim no effect plans for is plain), holds reads it back from a
// record, check refuses a conflict before anything is done, apply does it,
// undo removes it, ensure puts a prepared claim's back in place (at start,
// from the periodic check, when the kubelet prepares it again) and sweep
// removes what no claim holds. The named steps stay where the state
// machine puts them: PrepareStarted saved before the first effect applies,
// stepSharingApplied after the last.
//
// Each effect also returns what the claim's CDI spec gets from it (edits;
// spec.go assembles them, with the NCCL topology file's, nccl.go, and cdi
// adds each vendor's): the spec is built from what each step returns, and
// cdi knows none of them.
//
// A new side effect is one file, effect_<name>.go: a type that embeds
// nothing (the defaults for check, ensure, sweep, claimOwned and edits),
// defines plan, holds, apply and undo and what else it needs, records in
// plan what undo must find after a crash (a checkpoint.Device field, with
// its record in internal/checkpoint), and wraps its backend failures with one
// of the kinds in errors.go; then one entry in effects and one in
// undoOrder (TestEffectLists checks that both name it) at the point its
// order with the others asks, and a case in TestEffectPlan and
// TestEffectApplyUndo. TestTrace pins what the others do, so it shows
// that they are unchanged.
package claims
