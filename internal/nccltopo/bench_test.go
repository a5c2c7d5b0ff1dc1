package nccltopo

import (
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// BenchmarkWrite is what the file adds to an 8-GPU prepare: building it
// and writing it atomically (temp file, fsync, rename), as a prepare does.
func BenchmarkWrite(b *testing.B) {
	for _, name := range []string{"dgx-h100", "mi300x-8"} {
		b.Run(name, func(b *testing.B) {
			n := machine(b, name)
			path := filepath.Join(b.TempDir(), "nccl-topo.xml")
			b.ReportAllocs()
			var size int
			for b.Loop() {
				f, err := Build(n, seq(8), Options{CPUArch: "x86_64"})
				if err != nil {
					b.Fatal(err)
				}
				if err := fsutil.WriteFileAtomic(path, f.XML, 0o644); err != nil {
					b.Fatal(err)
				}
				size = len(f.XML)
			}
			b.ReportMetric(float64(size), "bytes/file")
		})
	}
}

// BenchmarkBuild is the file's construction alone.
func BenchmarkBuild(b *testing.B) {
	n := machine(b, "mi300x-8")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(n, seq(8), Options{CPUArch: "x86_64"}); err != nil {
			b.Fatal(err)
		}
	}
}
