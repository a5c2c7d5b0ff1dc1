package webhook

import (
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// opaqueConfig is one opaque device configuration of an object.
type opaqueConfig struct {
	// path is that of the opaque object, e.g. spec.devices.config[0].opaque.
	path   *field.Path
	driver string
	params []byte
}

// extractor decodes an object's JSON and lists its opaque configurations.
type extractor func(raw []byte) (metav1.ObjectMeta, []opaqueConfig, error)

// The kinds the webhook validates. The chart registers resource.k8s.io/v1
// with matchPolicy Equivalent, so the API server converts other versions of
// these resources to v1 before it sends them.
var (
	claimKind    = resourceapi.SchemeGroupVersion.WithKind("ResourceClaim")
	templateKind = resourceapi.SchemeGroupVersion.WithKind("ResourceClaimTemplate")
	classKind    = resourceapi.SchemeGroupVersion.WithKind("DeviceClass")
)

var extractors = map[schema.GroupVersionKind]extractor{
	claimKind: func(raw []byte) (metav1.ObjectMeta, []opaqueConfig, error) {
		var o resourceapi.ResourceClaim
		err := json.Unmarshal(raw, &o)
		return o.ObjectMeta, claimConfigs(field.NewPath("spec", "devices", "config"), o.Spec.Devices.Config), err
	},
	templateKind: func(raw []byte) (metav1.ObjectMeta, []opaqueConfig, error) {
		var o resourceapi.ResourceClaimTemplate
		err := json.Unmarshal(raw, &o)
		return o.ObjectMeta, claimConfigs(field.NewPath("spec", "spec", "devices", "config"), o.Spec.Spec.Devices.Config), err
	},
	classKind: func(raw []byte) (metav1.ObjectMeta, []opaqueConfig, error) {
		var o resourceapi.DeviceClass
		err := json.Unmarshal(raw, &o)
		var out []opaqueConfig
		for i, c := range o.Spec.Config {
			out = appendOpaque(out, field.NewPath("spec", "config").Index(i), c.DeviceConfiguration)
		}
		return o.ObjectMeta, out, err
	},
}

func claimConfigs(p *field.Path, cfgs []resourceapi.DeviceClaimConfiguration) []opaqueConfig {
	var out []opaqueConfig
	for i, c := range cfgs {
		out = appendOpaque(out, p.Index(i), c.DeviceConfiguration)
	}
	return out
}

func appendOpaque(out []opaqueConfig, p *field.Path, c resourceapi.DeviceConfiguration) []opaqueConfig {
	if c.Opaque == nil {
		return out
	}
	return append(out, opaqueConfig{path: p.Child("opaque"), driver: c.Opaque.Driver, params: c.Opaque.Parameters.Raw})
}

// decodeObject decodes raw as kind; an error names the kind.
func decodeObject(kind schema.GroupVersionKind, raw []byte) (metav1.ObjectMeta, []opaqueConfig, error) {
	meta, cfgs, err := extractors[kind](raw)
	if err != nil {
		return meta, nil, fmt.Errorf("decode %s: %w", kind.Kind, err)
	}
	return meta, cfgs, nil
}
