package sim

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/internal/golden"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// TestDeviceTreeGolden pins the device tree of every catalogue machine: as
// the catalogue has it, with partitioning enabled everywhere, and with one
// partition more on every GPU that can take one. Each line is a node's path
// and the numbers DeviceNumbers gives it.
func TestDeviceTreeGolden(t *testing.T) {
	for _, name := range CatalogNames() {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			b, _ := newBackend(t, mustProfile(t, name))
			fmt.Fprintf(&out, "# %s as catalogued\n", name)
			listTree(t, &out, b)

			b, _ = newBackend(t, enableAll(mustProfile(t, name)))
			fmt.Fprintf(&out, "# %s, partitioning enabled\n", name)
			enabled := listTree(t, &bytes.Buffer{}, b)
			listTree(t, &out, b)

			fmt.Fprintf(&out, "# %s, one partition more per GPU\n", name)
			created := map[string]string{}
			for _, g := range discover(t, b).GPUs {
				if p := addPartition(b, &g); p != nil {
					fmt.Fprintf(&out, "created %s at %d:%d on %s (GI %d)\n", p.Profile, p.Placement.Start, p.Placement.Size, g.UUID, p.GPUInstanceID)
					created[p.UUID] = g.UUID
				}
			}
			listTree(t, &out, b)

			// Destroying them gives the tree back as it was.
			for p, g := range created {
				if err := b.DestroyPartition(context.Background(), g, p); err != nil {
					t.Fatal(err)
				}
			}
			if after := listTree(t, &bytes.Buffer{}, b); after != enabled {
				t.Errorf("tree after destroying the partitions:\n%s\nwant\n%s", after, enabled)
			}
			treeGolden(t, "devtree-"+name+".txt", out.Bytes())
		})
	}
}

// addPartition creates the first profile at the first placement that the
// GPU takes, or returns nil when it takes none.
func addPartition(b *Backend, g *inventory.GPU) *inventory.Partition {
	if g.Partitioning == nil {
		return nil
	}
	for _, pr := range g.Partitioning.Profiles {
		for _, pl := range pr.Placements {
			if p, err := b.CreatePartition(context.Background(), g.UUID, pr.Name, pl); err == nil {
				return p
			}
		}
	}
	return nil
}

// listTree writes the tree's nodes in path order with their numbers,
// checking each against the node itself where mknod made a real one.
func listTree(t *testing.T, w *bytes.Buffer, b *Backend) string {
	t.Helper()
	start := w.Len()
	err := filepath.WalkDir(b.DevRoot(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(b.DevRoot(), p)
		rel = filepath.ToSlash(rel)
		major, minor, ok := b.DeviceNumbers(rel)
		if !ok {
			t.Errorf("%s is in the tree but DeviceNumbers does not know it", rel)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && (int64(unix.Major(st.Rdev)) != major || int64(unix.Minor(st.Rdev)) != minor) {
			t.Errorf("%s is %d:%d, DeviceNumbers says %d:%d", rel, unix.Major(st.Rdev), unix.Minor(st.Rdev), major, minor)
		}
		fmt.Fprintf(w, "%s %d:%d\n", rel, major, minor)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return w.String()[start:]
}

// treeGolden compares got with testdata/golden/name (internal/golden).
func treeGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Compare(t, filepath.Join("testdata", "golden", name), got)
}
