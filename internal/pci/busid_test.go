package pci

import "testing"

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"0000:18:00.0":     "0000:18:00.0",
		"00000000:18:00.0": "0000:18:00.0", // NVML
		"00000000:DB:00.0": "0000:db:00.0",
		"0001:0A:1F.7":     "0001:0a:1f.7",
		"0001:C1:1f.7":     "0001:c1:1f.7",
		"10000:00:00.0":    "10000:00:00.0", // a domain that needs 5 digits
	} {
		if got, err := Normalize(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "18:00.0", "0000:zz:00.0", "0000:18:00.9", "0000:18:00.8", "0000:18:20.0", "000:18:00.0", "0000:1:00.0", " 0000:18:00.0"} {
		if got, err := Normalize(bad); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}

func TestLess(t *testing.T) {
	ids := []string{"0000:18:00.0", "0000:18:00.1", "0000:18:01.0", "0000:2a:00.0", "0001:00:00.0"}
	for i := 0; i+1 < len(ids); i++ {
		a, _ := ParseBusID(ids[i])
		b, _ := ParseBusID(ids[i+1])
		if !a.Less(b) || b.Less(a) {
			t.Errorf("%s < %s broken", ids[i], ids[i+1])
		}
	}
}
