// Package doctor is `kubectl tessera doctor`: the troubleshooting table as
// checks, PASS, WARN or FAIL with what to do. The checks are pure functions
// of an Input (Gather fills one from a cluster), so that each can be tested
// without one.
//
//   - input.go: what the checks look at, and what they find (Finding).
//   - run.go: the checks in order, fleet-wide then node by node.
//   - one file a check: deviceclasses.go, node.go, slices.go, readyz.go,
//     health.go (device taints), prepare.go (claims stuck in prepare,
//     failed-prepare events), partitioning.go (the node label against
//     what is published), driver.go (a driver file an agent found
//     missing under its driver root, from the agent pods' status),
//     imex.go (a tray's domain's IMEX channels published, and no prepare
//     that waited for its IMEX daemon).
//   - findings.go: bounding long lists and messages.
//   - gather.go: reading the Input from a cluster; probe.go asking an
//     agent's /readyz.
//   - print.go: the PASS/WARN/FAIL lines.
package doctor
