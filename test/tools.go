//go:build tools

// Package tools records the Kubernetes commands that hack/build-cluster-bins.sh
// builds from this module, so that `go mod tidy` keeps their dependencies.
// The build tag keeps it out of every real build.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
