package checkpoint

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkSave is what one prepare or unprepare pays to record the
// node's state with n claims prepared: the snapshot the claim manager
// takes (Clone) and the write (Save).
func BenchmarkSave(b *testing.B) {
	for _, n := range []int{1, 16, 128, 512} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			cp := New()
			cp.BootID = "5c1e0b8a-0f7e-4a57-9b1c-2d3e4f5a6b7c"
			tmpl := sample().Claims["uid-a"]
			for i := range n {
				c := tmpl.clone()
				c.UID = fmt.Sprintf("6f1c2a9e-8d0b-4e53-9a57-%012d", i)
				cp.Claims[c.UID] = c
			}
			s := NewStore(filepath.Join(b.TempDir(), "checkpoint.json"))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Save(cp.Clone()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
