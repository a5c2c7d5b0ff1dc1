// Package agent wires the node agent together from its flags: it picks the
// backend, then either prints the node's ResourceSlices (--dry-run) or runs
// the kubelet plugin until it is told to stop.
package agent
