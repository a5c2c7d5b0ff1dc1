package topocmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tessera-gpu/tessera/internal/inspect"
)

// topoLegend follows nvidia-smi topo -m, saying which entries published
// attributes can and cannot show.
const topoLegend = `Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (different numaNode)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node (same numaNode, different pcieRoot)
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (same pcieRoot)
  XGMI = Connection traversing AMD Infinity Fabric (xGMI) (same fabricIsland, fabric xgmi)
  NV#  = Connection traversing a bonded set of # NVLinks (same fabricIsland, fabric nvlink or nvswitch; # = fabricBandwidthGBps / the per-link bandwidth of the GPU generation: 25 GB/s, 50 for NVLink 5; rounded; NV alone when no bandwidth is published)
  ?    = Not enough published attributes to tell

  Built from published attributes only: PCIe switches below a root are not published,
  so PIX and PXB never appear; GPUs behind a switch under the same root show as PHB.
`

// Print prints t as nvidia-smi topo -m prints its matrix, then the
// legend and the fabric islands.
func Print(w io.Writer, t *Topology) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := []string{""}
	for _, g := range t.GPUs {
		head = append(head, g.Device)
	}
	head = append(head, "NUMA Affinity")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for i, g := range t.GPUs {
		cells := append([]string{g.Device}, t.Links[i]...)
		cells = append(cells, orNA(inspect.FormatNUMA(g.NUMANode)))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\nFabric islands:\n", topoLegend)
	for _, is := range t.Islands {
		bw := ""
		if is.BandwidthGBps > 0 {
			bw = fmt.Sprintf(", %d GB/s", is.BandwidthGBps)
		}
		if is.Domain != "" {
			bw += ", domain " + is.Domain
		}
		fmt.Fprintf(w, "  %s (%s%s): %s\n", is.ID, is.Fabric, bw, strings.Join(is.Devices, " "))
	}
	if len(t.PartitionedOnly) > 0 {
		fmt.Fprintf(w, "\nNot shown (published only as partitions, no whole-GPU device): %s\n", strings.Join(t.PartitionedOnly, " "))
	}
	return nil
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}
