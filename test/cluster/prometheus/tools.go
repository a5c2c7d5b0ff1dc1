//go:build tools

// Package tools pins Prometheus's promtool, which hack/build-promtool.sh
// builds from this module for the chart's rules tests (test/chart), so
// that `go mod tidy` keeps its dependencies. A module of its own: the
// Prometheus server's dependencies stay out of the test module's, and the
// build tag keeps the file out of every real build.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
