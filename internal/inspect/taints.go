package inspect

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// Taint is a device taint (health).
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// String is the taint as key=value:Effect (key:Effect without a value).
func (t Taint) String() string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + t.Effect
}

// TaintsOf is the device's taints.
func TaintsOf(d *resourceapi.Device) []Taint {
	var out []Taint
	for _, t := range d.Taints {
		out = append(out, Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

// MergeTaints adds the taints of add that ts lacks.
func MergeTaints(ts, add []Taint) []Taint {
	for _, t := range add {
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	return ts
}
