package amdsysfs

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzParseProperties checks that no input makes the parser panic, and that
// whatever it accepts survives a print/parse round trip unchanged (the
// parser neither invents nor drops pairs). Seeds are in
// testdata/fuzz/FuzzParseProperties, taken from the fixtures.
func FuzzParseProperties(f *testing.F) {
	f.Add([]byte("simd_count 80\nunique_id 598046273873802902\n"))
	f.Add([]byte("heap_type 1\r\nsize_in_bytes 51539607552\r\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProperties(data)
		if err != nil {
			if p != nil {
				t.Fatalf("error %v with non-nil result", err)
			}
			return
		}
		var b strings.Builder
		for k, v := range p {
			fmt.Fprintf(&b, "%s %d\n", k, v)
		}
		q, err := ParseProperties([]byte(b.String()))
		if err != nil {
			t.Fatalf("re-parsing accepted output: %v", err)
		}
		if len(q) != len(p) {
			t.Fatalf("round trip: %d keys, want %d", len(q), len(p))
		}
		for k, v := range p {
			if q[k] != v {
				t.Fatalf("round trip: %s = %d, want %d", k, q[k], v)
			}
		}
	})
}
