// Package deviceclasses ships Tessera's DeviceClasses, embedded so tests
// and tools use exactly the file that is applied to clusters.
package deviceclasses

import _ "embed"

// YAML is deviceclasses.yaml.
//
//go:embed deviceclasses.yaml
var YAML []byte
