// Package uninstall is what `helm uninstall` runs (the chart's
// uninstall.yaml hooks), as `tessera-kubelet-plugin uninstall <step>`:
//
//   - check (pre-delete, before anything is deleted): refuses while a
//     claim of the driver on one of the release's nodes is reserved by a
//     pod, naming the claims and their pods; the uninstall then stops
//     with nothing deleted.
//   - node (post-delete, a pod on every node the agents ran on, with the
//     agent's own mounts, flags and security context): waits for the
//     agent to exit (its handover lock), refuses while its checkpoint
//     still holds a claim, then destroys the partitions it carved, turns
//     off the MIG mode it turned on, and removes what it put on the host:
//     its claim CDI specs, the MPS daemons' directories, the memory limit
//     hook and its state, the checkpoint, sockets and plugin directory.
//   - wait (post-delete): deletes the MPS and IMEX daemon pods (owned by the Node,
//     so nothing else would) and waits until every node's cleanup is done
//     (ready) or one refused, whose message it reports.
//   - ready: the node pods' readiness probe.
package uninstall
