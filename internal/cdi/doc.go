// Package cdi writes the per-claim CDI specs through which containers get
// the device nodes and environment of their allocated GPUs.
//
// One spec file per prepared claim, kind k8s.gpu.tessera.dev/claim. Each
// allocated device becomes one CDI device named after the claim UID, and
// each vendor present in the claim gets one "common" CDI device holding
// what every container of that vendor needs once (control nodes, the
// visible-devices variable). Container runtimes cache specs by device name,
// so names embed the claim UID and are never reused for another claim.
//
// The package knows no effect: a spec is built from a ClaimSpec, the edits
// each owner returned (edits.go): the vendors' nodes and environment, which
// it asks gpuvendor for, and the claims package's effects and NCCL file,
// which hand their edits in.
//
// The spec also records, in CDI annotations, which claim and which DRA
// devices it belongs to, so the agent can rebuild its checkpoint from the
// spec directory when the checkpoint is lost (ListClaimSpecs).
package cdi
