//go:build tools

// Package tools records that hack/build-cluster-bins.sh builds helm from
// this module, so that `go mod tidy` keeps its dependencies.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
