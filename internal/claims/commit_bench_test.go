package claims

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// BenchmarkPersist is what the manager pays to record one change of a
// claim with n claims prepared, on the path a plain prepare or unprepare
// takes (change): apply it under m.mu, publish what changed, write it
// (internal/checkpoint's BenchmarkSave is the store's part of it).
func BenchmarkPersist(b *testing.B) {
	defer func(v func(*checkpoint.Store, *checkpoint.Checkpoint)) { verifyWrite = v }(verifyWrite)
	verifyWrite = nil
	for _, n := range []int{1, 16, 128, 512} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			cp := checkpoint.New()
			cp.BootID = "5c1e0b8a-0f7e-4a57-9b1c-2d3e4f5a6b7c"
			var uids []string
			for i := range n {
				uid := fmt.Sprintf("6f1c2a9e-8d0b-4e53-9a57-%012d", i)
				dev := fmt.Sprintf("gpu-%d", i)
				cp.Claims[uid] = &checkpoint.Claim{UID: uid, Namespace: "default", Name: fmt.Sprint("claim-", i), State: checkpoint.PrepareCompleted, Updated: time.Now(),
					Devices: []checkpoint.Device{{Request: "gpu", Pool: nodeName, Device: dev, GPUUUID: "GPU-" + uid,
						CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=" + uid + "-0-" + dev, "k8s.gpu.tessera.dev/claim=" + uid + "-common-nvidia"}}}}
				uids = append(uids, uid)
			}
			m := &Manager{cfg: Config{Store: checkpoint.NewStore(filepath.Join(b.TempDir(), "checkpoint.json"))}, cp: cp}
			if err := m.persist(m.publishAll()); err != nil { // the start
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				uid := uids[i%n]
				i++
				if err := m.change(false, uid, func() { m.cp.Claims[uid].Updated = time.Now() }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
