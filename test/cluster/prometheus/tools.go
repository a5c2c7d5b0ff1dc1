//go:build tools

// Package tools pins Prometheus's server and promtool, which hack/build-prometheus.sh
// builds from this module for the chart's tests (test/chart) and the e2e
// test that scrapes the agents (test/e2e), so
// that `go mod tidy` keeps its dependencies. A module of its own: the
// Prometheus server's dependencies stay out of the test module's, and the
// build tag keeps the file out of every real build.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
