package top

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tessera-gpu/tessera/internal/inspect"
)

// Sort orders of --sort-by.
const (
	SortName        = ""
	SortUtilization = "utilization"
	SortMemory      = "memory"
)

// CheckFlags validates -o and --sort-by.
func CheckFlags(output, sortBy string) error {
	switch output {
	case inspect.OutputTable, inspect.OutputWide, inspect.OutputJSON, inspect.OutputYAML:
	default:
		return fmt.Errorf("unknown output format %q: use wide, json or yaml", output)
	}
	switch sortBy {
	case SortName, SortUtilization, SortMemory:
		return nil
	}
	return fmt.Errorf("unknown --sort-by %q: use utilization or memory", sortBy)
}

// PrintPods prints the pods' rows: one per pod and device.
func PrintPods(w io.Writer, t *Top, output, sortBy string) error {
	pods := slices.Clone(t.Pods)
	sortRows(pods, sortBy, func(p Pod) (*float64, *int64) { return p.Utilization, p.MemoryUsed })
	switch output {
	case inspect.OutputJSON:
		return inspect.WriteJSON(w, pods)
	case inspect.OutputYAML:
		return inspect.WriteYAML(w, pods)
	}
	if len(pods) == 0 {
		_, err := fmt.Fprintln(w, "No pods hold Tessera GPUs.")
		return err
	}
	wide := output == inspect.OutputWide
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := []string{"NAMESPACE", "POD", "NODE", "DEVICE", "UTIL", "MEMORY(USED/ALLOWED)"}
	if wide {
		head = append(head, "TEMP", "POWER", "CLAIM", "CONTAINERS", "SHARE", "UUID")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	shared := false
	for _, p := range pods {
		mark := ""
		if p.SharedWith > 0 {
			mark, shared = "*", true
		}
		cells := []string{p.Namespace, p.Pod, p.Node, p.Device, percent(p.Utilization) + mark, memory(p.MemoryUsed, p.MemoryAllowed) + mark}
		if wide {
			cells = append(cells, celsius(p.Temperature), watts(p.Power, nil), p.Claim, orDash(strings.Join(p.Containers, ",")),
				orDash(p.ShareID), orDash(p.UUID))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shared {
		_, err := fmt.Fprintln(w, "\n* the whole device's readings: other pods share it, and the hardware reports none per pod")
		return err
	}
	return nil
}

// PrintNodes prints one row per node.
func PrintNodes(w io.Writer, t *Top, output, sortBy string) error {
	nodes := slices.Clone(t.Nodes)
	sortRows(nodes, sortBy, func(n Node) (*float64, *int64) { return n.Utilization, n.MemoryUsed })
	switch output {
	case inspect.OutputJSON:
		return inspect.WriteJSON(w, nodes)
	case inspect.OutputYAML:
		return inspect.WriteYAML(w, nodes)
	}
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(w, "No Tessera GPU readings (is the agents' --telemetry-poll 0?).")
		return err
	}
	wide := output == inspect.OutputWide
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := []string{"NODE", "GPUS", "IN-USE", "PODS", "UTIL", "MEMORY(USED/TOTAL)"}
	if wide {
		head = append(head, "POWER(DRAW/LIMIT)", "MAX-TEMP")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, n := range nodes {
		cells := []string{n.Node, strconv.Itoa(n.GPUs), strconv.Itoa(n.InUse), strconv.Itoa(n.Pods), percent(n.Utilization), memory(n.MemoryUsed, n.MemoryTotal)}
		if wide {
			cells = append(cells, watts(n.Power, n.PowerLimit), celsius(n.Temperature))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// sortRows orders rows busiest first by sortBy (unknown readings last),
// keeping the name order among equals; SortName keeps the rows as built.
func sortRows[T any](rows []T, sortBy string, key func(T) (*float64, *int64)) {
	if sortBy == SortName {
		return
	}
	slices.SortStableFunc(rows, func(a, b T) int {
		ua, ma := key(a)
		ub, mb := key(b)
		if sortBy == SortUtilization {
			return desc(ua, ub)
		}
		return desc(ma, mb)
	})
}

func desc[N int64 | float64](a, b *N) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return cmp.Compare(*b, *a)
}

func percent(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v*100, 'f', 0, 64) + "%"
}

func memory(used, of *int64) string {
	u, o := "-", "-"
	if used != nil {
		u = inspect.HumanBytes(*used)
	}
	if of != nil {
		o = inspect.HumanBytes(*of)
	}
	if used == nil && of == nil {
		return "-"
	}
	return u + "/" + o
}

func watts(v, limit *float64) string {
	if v == nil {
		return "-"
	}
	s := strconv.FormatFloat(*v, 'f', 0, 64) + "W"
	if limit != nil {
		s += "/" + strconv.FormatFloat(*limit, 'f', 0, 64) + "W"
	}
	return s
}

func celsius(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 0, 64) + "C"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
