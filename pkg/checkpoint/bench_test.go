package checkpoint

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSave is what one prepare or unprepare pays to record the
// node's state with n claims prepared: the snapshot the claim manager
// takes (Clone) and the write (Save), one claim changed since the last
// save, as a prepare or unprepare changes one.
func BenchmarkSave(b *testing.B) {
	for _, n := range []int{1, 16, 128, 512} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			cp := New()
			cp.BootID = "5c1e0b8a-0f7e-4a57-9b1c-2d3e4f5a6b7c"
			tmpl := sample().Claims["uid-a"]
			var uids []string
			for i := range n {
				c := tmpl.clone()
				c.UID = fmt.Sprintf("6f1c2a9e-8d0b-4e53-9a57-%012d", i)
				cp.Claims[c.UID] = c
				uids = append(uids, c.UID)
			}
			s := NewStore(filepath.Join(b.TempDir(), "checkpoint.json"))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				cp.Claims[uids[i%n]].Updated = t0.Add(time.Duration(i))
				i++
				if err := s.Save(cp.Clone()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
