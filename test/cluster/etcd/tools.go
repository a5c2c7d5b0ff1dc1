//go:build tools

// Package tools records that hack/build-cluster-bins.sh builds etcd from
// this module, so that `go mod tidy` keeps its dependencies.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
