package checkpoint

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkSave is what one prepare or unprepare pays to record the
// node's state with n claims prepared, as the claim manager records it
// (internal/claims, commit.go): a copy of the one claim it changed and of the
// node-wide fields (its snapshot), and the save of that change
// (SaveChanges: one record appended to the log). b.Loop runs many saves,
// so the figure is amortized: it includes the compactions, a snapshot of
// all n claims each time the log grows past the snapshot (and past
// minLogBytes).
func BenchmarkSave(b *testing.B) {
	for _, n := range []int{1, 16, 128, 512} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			cp := New()
			cp.BootID = "5c1e0b8a-0f7e-4a57-9b1c-2d3e4f5a6b7c"
			tmpl := sample().Claims["uid-a"]
			var uids []string
			for i := range n {
				c := tmpl.Clone()
				c.UID = fmt.Sprintf("6f1c2a9e-8d0b-4e53-9a57-%012d", i)
				cp.Claims[c.UID] = c
				uids = append(uids, c.UID)
			}
			s := NewStore(filepath.Join(b.TempDir(), "checkpoint.json"))
			if err := s.Save(cp); err != nil { // the agent's start
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c := cp.Claims[uids[i%n]]
				c.Updated = t0.Add(time.Duration(i))
				i++
				ch := &Changes{Claims: map[string]*Claim{c.UID: c.Clone()}, BootID: cp.BootID, PartitionModeOn: slices.Clone(cp.PartitionModeOn)}
				if err := s.SaveChanges(ch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
