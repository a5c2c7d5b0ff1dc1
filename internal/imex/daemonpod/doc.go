// Package daemonpod runs a node's IMEX daemon as a pod of that node, for
// the agent (--imex-daemons=pod), as internal/mps/daemonpod runs the MPS
// control daemons.
//
// One daemon per node serves the whole multi-node NVLink domain, every
// pod group there on a channel of its own (docs/rack.md). The agent starts
// it when the first claim of an IMEX channel is prepared on the node and
// stops it when the last such claim is unprepared, so a tray without
// jobs runs none. Its peers are the domain's nodes, read at each start
// from the Nodes labelled with the domain (one filtered list, no watch),
// each at its gpu.tessera.dev/imex-address annotation or else its
// InternalIP, sorted by node name so that every tray writes the same
// nodes file (NVIDIA IMEX guide: daemons whose lists differ fail to
// connect). The daemon does not wait for quorum (IMEX_WAIT_FOR_QUORUM=NONE):
// the peers of a tray without jobs run no daemon, and a daemon is ready
// once it runs, as NVIDIA's is; it connects to each peer when that peer's
// daemon starts.
//
// The pod is exactly what Spec builds, and the chart's admission policy
// admits only that: the agent's image, the daemon program with its config
// file, the host network (its peers reach it at the node's address), the
// IMEX directory mounted at its own path, no token. The config file, the
// nodes file and the command socket live in that directory on the host,
// where the agent writes the first two and asks the daemon through the
// third.
package daemonpod
