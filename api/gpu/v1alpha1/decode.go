package v1alpha1

import (
	"bytes"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// Config is a decoded, defaulted and validated configuration object.
type Config interface {
	// GetKind is the object's kind.
	GetKind() string
	// DeviceType is the `type` attribute of the devices the kind applies
	// to: "gpu" or "partition".
	DeviceType() string
	// GetSharing is the sharing settings, nil when none are given.
	GetSharing() *Sharing
	// GetTopology is the topology settings, nil when none are given.
	GetTopology() *TopologyConfig
}

func (c *GpuConfig) GetKind() string            { return GpuConfigKind }
func (c *GpuConfig) DeviceType() string         { return "gpu" }
func (c *GpuConfig) GetSharing() *Sharing       { return c.Sharing }
func (c *PartitionConfig) GetKind() string      { return PartitionConfigKind }
func (c *PartitionConfig) DeviceType() string   { return "partition" }
func (c *PartitionConfig) GetSharing() *Sharing { return c.Sharing }

func (c *GpuConfig) GetTopology() *TopologyConfig       { return c.Topology }
func (c *PartitionConfig) GetTopology() *TopologyConfig { return c.Topology }

// MaxConfigBytes bounds what Decode reads; the API server limits opaque
// parameters to 10 KiB.
const MaxConfigBytes = 10 * 1024

// Decode turns the JSON of an opaque parameters object into its kind,
// strictly: an unknown apiVersion or kind, an unknown or duplicated field, a
// value of the wrong type, and every failed validation is an error, each
// naming the field path. The result is defaulted and valid.
func Decode(data []byte) (Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("parameters: %d bytes, more than the %d allowed", len(data), MaxConfigBytes)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, field.Required(field.NewPath("parameters"), "an object with apiVersion and kind")
	}
	var tm TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &tm); err != nil {
		return nil, fmt.Errorf("parameters: %w", cleanJSONError(err))
	}
	switch {
	case tm.APIVersion == "":
		return nil, field.Required(field.NewPath("apiVersion"), "must be "+APIVersion)
	case tm.APIVersion != APIVersion:
		return nil, field.NotSupported(field.NewPath("apiVersion"), tm.APIVersion, []string{APIVersion})
	}
	var obj interface {
		Config
		validate() field.ErrorList
		setDefaults()
	}
	switch tm.Kind {
	case GpuConfigKind:
		obj = &GpuConfig{}
	case PartitionConfigKind:
		obj = &PartitionConfig{}
	case "":
		return nil, field.Required(field.NewPath("kind"), "one of "+GpuConfigKind+", "+PartitionConfigKind)
	default:
		return nil, field.NotSupported(field.NewPath("kind"), tm.Kind, []string{GpuConfigKind, PartitionConfigKind})
	}
	strict, err := sigsjson.UnmarshalStrict(data, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, cleanJSONError(err))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("%s: %s", tm.Kind, strings.Join(msgs, "; "))
	}
	obj.setDefaults()
	if errs := obj.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", tm.Kind, errs.ToAggregate())
	}
	return obj, nil
}

// cleanJSONError rewrites encoding/json's type errors, which name the Go
// struct ("Go struct field GpuConfig.sharing.mps.defaultActiveThreadPercentage
// of type int32"), into the field path a user wrote.
func cleanJSONError(err error) error {
	msg := err.Error()
	i := strings.Index(msg, "Go struct field ")
	if i < 0 {
		return err
	}
	path, typ, _ := strings.Cut(msg[i+len("Go struct field "):], " of type ")
	if dot := strings.Index(path, "."); dot >= 0 {
		path = path[dot+1:]
	}
	got := strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(msg[:i], "json: cannot unmarshal")), " into")
	return fmt.Errorf("%s: wrong type: got %s, want %s", path, got, typ)
}
