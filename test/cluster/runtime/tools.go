//go:build tools

// Package tools records the container runtime of the local cluster's
// containerd nodes, which hack/build-cluster-bins.sh builds from this module:
// containerd, its runc shim and ctr, runc, and the CNI plugins pods are
// networked with. A module of its own (like etcd and helm): containerd pulls
// in its own versions of much that the Kubernetes binaries also use.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "github.com/opencontainers/runc"
)
