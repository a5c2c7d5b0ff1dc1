// Package fabric turns a node's link graph into the schema's fabric
// attributes: fabric, fabricIsland and fabricBandwidthGBps.
//
// # Islands
//
// An island is a set of GPUs in which every pair has a direct high-speed path:
// a shared NVSwitch plane, a direct NVLink, or a direct xGMI link. PCIe never
// makes an island; a GPU without such links is an island of its own.
//
// Because `matchAttribute: fabricIsland` promises "these GPUs talk to each
// other directly", an island must be a clique of the link graph. When the
// graph is not a union of cliques (a chain of NVLink bridges, the hybrid
// cube-mesh of DGX-1 where each GPU links to only some peers), each connected
// component is split greedily: take the largest clique of what is left (ties
// go to the clique whose lowest member comes first in GPU order), make it an
// island, remove it, repeat. For DGX-1's cube-mesh this gives the two
// fully-connected quads {0,1,2,3} and {4,5,6,7}; for a chain 0-1-2 it gives
// {0,1} and {2}. A GPU keeps its `fabric` kind even when it ends alone.
//
// Island IDs are "<fabric>-<hash>" where the hash covers the members' UUIDs,
// so they are stable across restarts and reboots, equal on every member, and
// different on different nodes.
package fabric
