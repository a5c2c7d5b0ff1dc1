package checkpoint

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNCCLTopoFileField: the device field is additive. It round-trips, is
// left out of the file when false (every checkpoint written so far is
// byte-for-byte what it was, golden_test.go), and a record without it, as
// an older agent wrote it, decodes as false; a record with it decodes with
// the plain decoder an older agent uses, which ignores it.
func TestNCCLTopoFileField(t *testing.T) {
	d := Device{Request: "gpu", Pool: "node-1", Device: "gpu-0", GPUUUID: "GPU-a", NCCLTopoFile: true}
	if got := DeviceOf(RecordOf(d)); !got.NCCLTopoFile {
		t.Fatalf("round trip lost NCCLTopoFile: %+v", got)
	}
	with, err := json.Marshal(RecordOf(d))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(with), `"ncclTopoFile":true`) {
		t.Errorf("record %s lacks ncclTopoFile", with)
	}
	d.NCCLTopoFile = false
	without, _ := json.Marshal(RecordOf(d))
	if strings.Contains(string(without), "ncclTopoFile") {
		t.Errorf("record %s names ncclTopoFile when false", without)
	}
	var r DeviceRecord
	if err := json.Unmarshal([]byte(`{"request":"gpu","pool":"node-1","device":"gpu-0"}`), &r); err != nil || r.NCCLTopoFile {
		t.Errorf("old record: %+v, %v", r, err)
	}
	var old struct {
		Device string `json:"device"`
	}
	if err := json.Unmarshal(with, &old); err != nil || old.Device != "gpu-0" {
		t.Errorf("a decoder without the field: %+v, %v", old, err)
	}
}
