package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// Every kind, built in Go, survives encode and strict decode unchanged:
// field names in the Go types and what Decode accepts cannot drift apart.
func TestRoundTrip(t *testing.T) {
	objs := []Config{
		&GpuConfig{TypeMeta: TypeMeta{APIVersion, GpuConfigKind}},
		&GpuConfig{TypeMeta: TypeMeta{APIVersion, GpuConfigKind}, Sharing: &Sharing{Strategy: TimeSlicing, TimeSlicing: &TimeSlicingConfig{Interval: MediumTimeSlice}}},
		&GpuConfig{TypeMeta: TypeMeta{APIVersion, GpuConfigKind}, Sharing: &Sharing{Strategy: MPS, MPS: &MPSConfig{
			DefaultActiveThreadPercentage:     ptr(int32(25)),
			DefaultPinnedDeviceMemoryLimit:    ptr(MustParseQuantity("10Gi")),
			DefaultPerDevicePinnedMemoryLimit: map[string]Quantity{"gpu-1": MustParseQuantity("2Gi")},
		}}},
		&GpuConfig{TypeMeta: TypeMeta{APIVersion, GpuConfigKind}, Topology: &TopologyConfig{NCCLTopoFile: true}},
		&GpuConfig{TypeMeta: TypeMeta{APIVersion, GpuConfigKind}, Sharing: &Sharing{Strategy: TimeSlicing, TimeSlicing: &TimeSlicingConfig{Interval: LongTimeSlice}}, Topology: &TopologyConfig{NCCLTopoFile: true}},
		&PartitionConfig{TypeMeta: TypeMeta{APIVersion, PartitionConfigKind}, Topology: &TopologyConfig{}},
		&PartitionConfig{TypeMeta: TypeMeta{APIVersion, PartitionConfigKind}, Sharing: &Sharing{Strategy: TimeSlicing, TimeSlicing: &TimeSlicingConfig{Interval: DefaultTimeSlice}}},
		&PartitionConfig{TypeMeta: TypeMeta{APIVersion, PartitionConfigKind}, Sharing: &Sharing{Strategy: MPS, MPS: &MPSConfig{DefaultActiveThreadPercentage: ptr(int32(100))}}},
	}
	for _, obj := range objs {
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(%s): %v", data, err)
		}
		again, _ := json.Marshal(got)
		if string(again) != string(data) {
			t.Errorf("round trip changed the object:\n in: %s\nout: %s", data, again)
		}
		if reflect.TypeOf(got) != reflect.TypeOf(obj) {
			t.Errorf("kind %T came back as %T", obj, got)
		}
	}
}
