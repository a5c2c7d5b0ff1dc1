// Package deviceclasses holds Tessera's DeviceClasses: deviceclasses.yaml,
// which the local cluster applies and the chart's template matches (a
// chart test holds the two equal), embedded so that kubectl-tessera's
// explain and the allocator tests use exactly those classes.
package deviceclasses

import _ "embed"

// YAML is deviceclasses.yaml.
//
//go:embed deviceclasses.yaml
var YAML []byte
