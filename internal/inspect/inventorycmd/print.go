package inventorycmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
)

// CheckOutput validates an -o value.
func CheckOutput(o string) error {
	switch o {
	case inspect.OutputTable, inspect.OutputWide, inspect.OutputJSON, inspect.OutputYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use wide, json or yaml", o)
}

// Print prints inv in the given output format.
func Print(w io.Writer, inv *Inventory, output string) error {
	switch output {
	case inspect.OutputJSON:
		return inspect.WriteJSON(w, inv)
	case inspect.OutputYAML:
		return inspect.WriteYAML(w, inv)
	case inspect.OutputTable, inspect.OutputWide:
		return printInventoryTable(w, inv, output == inspect.OutputWide)
	}
	return CheckOutput(output)
}

func printInventoryTable(w io.Writer, inv *Inventory, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := []string{"NODE", "DEVICE", "VENDOR", "MODEL", "MEMORY", "ISLAND", "PARTITIONING", "HEALTH", "USAGE", "HOLDERS"}
	if wide {
		head = append(head, "FABRIC", "DOMAIN", "NUMA", "PCIE-ROOT", "PCI-BUS", "UUID")
	}
	// Empty cells print "-", except on partition rows, which leave the
	// GPU's columns (node, vendor, island, ...) blank.
	row := func(partition bool, cells ...string) {
		for i, c := range cells {
			if c == "" && !partition {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.TrimRight(strings.Join(cells, "\t"), "\t"))
	}
	row(false, head...)
	for _, n := range inv.Nodes {
		for i := range n.GPUs {
			g := &n.GPUs[i]
			cells := []string{g.Node, g.Device, g.Vendor, model(g), memory(g.MemoryBytes), g.FabricIsland,
				partitioning(g), health(g.Taints), gpuUsage(g), holders(g.Holders)}
			if wide {
				cells = append(cells, g.Fabric, g.FabricDomain, inspect.FormatNUMA(g.NUMANode), g.PCIeRoot, g.PCIBusID, g.UUID)
			}
			row(false, cells...)
			for _, p := range g.Partitions {
				cells := []string{"", "  " + p.Device, "", strings.TrimSpace(p.Kind + " " + p.Profile), memory(p.MemoryBytes), "",
					"", health(p.Taints), partitionUsage(&p), orDash(holders(p.Holders))}
				if wide {
					cells = append(cells, "", "", "", "", "", p.UUID)
				}
				row(true, cells...)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, n := range inv.Nodes {
		fmt.Fprintf(w, "node %s: %s\n", n.Name, summaryText(n.Summary))
	}
	nodes := "nodes"
	if inv.Fleet.Nodes == 1 {
		nodes = "node"
	}
	_, err := fmt.Fprintf(w, "fleet (%d %s): %s\n", inv.Fleet.Nodes, nodes, summaryText(inv.Fleet))
	return err
}

func model(g *GPU) string {
	m := g.Model
	if m == "" {
		m = "unknown"
	}
	if g.Simulated {
		m += " (sim)"
	}
	return m
}

func memory(b int64) string {
	if b <= 0 {
		return ""
	}
	return inspect.HumanBytes(b)
}

func partitioning(g *GPU) string {
	out := g.Partitioning
	if g.Partitioning != names.PartitioningNone && g.PartitionKind != "" {
		out += " (" + g.PartitionKind + ")"
	}
	if g.Mode != "" {
		out += " " + g.Mode
	}
	return out
}

// health is "ok", or the taints as key=value:Effect.
func health(ts []inspect.Taint) string {
	if len(ts) == 0 {
		return "ok"
	}
	var out []string
	for _, t := range ts {
		out = append(out, t.String())
	}
	return strings.Join(out, ",")
}

func gpuUsage(g *GPU) string {
	switch {
	case g.Mode != "" && g.MemorySlices != nil && g.MemorySlices.Total == 0:
		// A GPU of modes: its counters are tokens, not memory slices.
		used := 0
		for _, p := range g.Partitions {
			if len(p.Holders) > 0 {
				used++
			}
		}
		switch {
		case len(g.Holders) > 0:
			return "allocated"
		case used > 0:
			return fmt.Sprintf("partitions %d", used)
		}
		return "free"
	case g.MemorySlices != nil:
		if g.MemorySlices.Used == 0 {
			return "free"
		}
		return fmt.Sprintf("slices %d/%d", g.MemorySlices.Used, g.MemorySlices.Total)
	case g.SharedMemory != nil:
		return sharedText(g.SharedMemory, len(g.Holders))
	case g.Partitioning == names.PartitioningStatic:
		used := 0
		for _, p := range g.Partitions {
			if len(p.Holders) > 0 {
				used++
			}
		}
		return fmt.Sprintf("partitions %d/%d", used, len(g.Partitions))
	case len(g.Holders) > 0:
		return "allocated"
	}
	return "free"
}

func partitionUsage(p *Partition) string {
	switch {
	case p.SharedMemory != nil:
		return sharedText(p.SharedMemory, len(p.Holders))
	case len(p.Holders) > 0:
		return "allocated"
	}
	return "free"
}

// sharedText is a shared device's memory use: "mem 12Gi/22.5Gi (2 shares)".
func sharedText(u *Usage, shares int) string {
	if shares == 0 {
		return "free"
	}
	s := "shares"
	if shares == 1 {
		s = "share"
	}
	return fmt.Sprintf("mem %s/%s (%d %s)", inspect.HumanBytes(u.Used), inspect.HumanBytes(u.Total), shares, s)
}

func holders(hs []inspect.Holder) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.String())
	}
	return strings.Join(out, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// summaryText: "8 GPUs (8x H100): 6 free, 2 in use, 0 unhealthy".
func summaryText(s Summary) string {
	var models []string
	for _, m := range s.Models {
		models = append(models, fmt.Sprintf("%dx %s", m.Count, m.Model))
	}
	gpus := "GPUs"
	if s.GPUs == 1 {
		gpus = "GPU"
	}
	text := fmt.Sprintf("%d %s", s.GPUs, gpus)
	if len(models) > 0 {
		text += " (" + strings.Join(models, ", ") + ")"
	}
	return fmt.Sprintf("%s: %d free, %d in use, %d unhealthy", text, s.Free, s.InUse, s.Unhealthy)
}
