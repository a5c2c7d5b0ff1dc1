package deviceclasses

import (
	"bytes"
	"fmt"
	"io"

	resourceapi "k8s.io/api/resource/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Lister serves a fixed set of DeviceClasses to the scheduler's allocator
// (k8s.io/dynamic-resource-allocation/structured), as its class lister.
type Lister []*resourceapi.DeviceClass

// List returns every class.
func (l Lister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

// Get returns the class named name.
func (l Lister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("device class %q not found", name)
}

// Parse returns the shipped DeviceClasses (YAML).
func Parse() ([]*resourceapi.DeviceClass, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(YAML), 4096)
	var out []*resourceapi.DeviceClass
	for {
		var c resourceapi.DeviceClass
		if err := dec.Decode(&c); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("deviceclasses.yaml: %w", err)
		}
		if c.Name != "" {
			out = append(out, &c)
		}
	}
}
