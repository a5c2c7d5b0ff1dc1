// Package explain is `kubectl tessera explain`: why a pending claim (or a
// pod's claims) fits where it does, node by node, with the scheduler's
// allocator as the judge and the rest explaining its verdict.
//
//   - explain.go: running the allocator on each node and following each
//     request through the node's devices, filter by filter.
//   - reasons.go: the reasons in words (selectors, in use, counters,
//     taints, capacity, constraints).
//   - load.go: the inputs (classes, pods, templates) from files or a
//     cluster, and which claims a target names.
//   - print.go: the text, JSON or YAML output.
package explain
