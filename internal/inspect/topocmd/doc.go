// Package topocmd is `kubectl tessera topo`: a node's GPU-to-GPU matrix as
// nvidia-smi topo -m prints it, classified from published attributes only.
//
//   - topo.go: the link classification and building the matrix.
//   - print.go: printing it, with the legend and the fabric islands.
package topocmd
