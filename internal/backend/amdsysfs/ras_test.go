package amdsysfs

import (
	"errors"
	"testing"
)

// The formats amdgpu_ras_sysfs_read prints: two lines, three for UMC on
// newer kernels (de, deferred, not counted), and the text it prints while
// a GPU reset is in progress.
func TestParseRASCount(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    rasCount
		wantErr error
		bad     bool
	}{
		{in: "ue: 0\nce: 3\n", want: rasCount{UE: 0, CE: 3}},
		{in: "ue: 2\nce: 18446744073709551615\n", want: rasCount{UE: 2, CE: 1<<64 - 1}},
		{in: "ue: 1\nce: 4\nde: 7\n", want: rasCount{UE: 1, CE: 4}},
		{in: "Query currently inaccessible\n", wantErr: errRASInaccessible},
		{in: "", bad: true},
		{in: "ue: 1\n", bad: true},
		{in: "ue: x\nce: 1\n", bad: true},
		{in: "ue: -1\nce: 1\n", bad: true},
		{in: "garbage\n", bad: true},
	} {
		got, err := parseRASCount([]byte(tc.in))
		switch {
		case tc.wantErr != nil:
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%q: error %v, want %v", tc.in, err, tc.wantErr)
			}
		case tc.bad:
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tc.in, got)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case got != tc.want:
			t.Errorf("%q: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// readRAS: only *_err_count files count; a broken block is reported apart
// and does not hide the others; one inaccessible block makes the whole
// device inaccessible; no ras directory is errNoRAS.
func TestReadRAS(t *testing.T) {
	root := copyTree(t, fixture("mi210-pcie"))
	r := fsRoot(root)
	dev := "sys/bus/pci/devices/0000:63:00.0"
	if _, _, err := readRAS(r, dev); !errors.Is(err, errNoRAS) {
		t.Fatalf("no ras dir: %v, want errNoRAS", err)
	}
	writeRAS(t, root, "0000:63:00.0", "umc", "ue: 1\nce: 2\nde: 0\n")
	writeRAS(t, root, "0000:63:00.0", "gfx", "ue: 0\nce: 5\n")
	writeRAS(t, root, "0000:63:00.0", "sdma", "nonsense\n")
	writeFile(t, root, dev+"/ras/features", "feature mask: 0x3fbfffef\n")
	blocks, bad, err := readRAS(r, dev)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks["umc"] != (rasCount{1, 2}) || blocks["gfx"] != (rasCount{0, 5}) {
		t.Errorf("blocks %+v", blocks)
	}
	if len(bad) != 1 || bad["sdma"] == nil {
		t.Errorf("bad %v, want sdma only", bad)
	}
	writeRAS(t, root, "0000:63:00.0", "gfx", rasInaccessible+"\n")
	if _, _, err := readRAS(r, dev); !errors.Is(err, errRASInaccessible) {
		t.Errorf("inaccessible: %v", err)
	}
}
