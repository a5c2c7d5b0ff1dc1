package explain

import (
	"fmt"
	"io"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inspect"
)

// CheckOutput validates explain's -o value: text (empty), json or yaml.
func CheckOutput(o string) error {
	switch o {
	case inspect.OutputTable, inspect.OutputJSON, inspect.OutputYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use json or yaml, or leave it out for text", o)
}

// Print prints ex as text (one block per node, the nodes that
// fit first), JSON or YAML.
func Print(w io.Writer, ex *Explanation, output string) error {
	switch output {
	case inspect.OutputJSON:
		return inspect.WriteJSON(w, ex)
	case inspect.OutputYAML:
		return inspect.WriteYAML(w, ex)
	case inspect.OutputTable:
		_, err := io.WriteString(w, explanationText(ex))
		return err
	}
	return CheckOutput(output)
}

func explanationText(ex *Explanation) string {
	var b strings.Builder
	what := "Claim " + ex.Claims[0]
	if len(ex.Claims) > 1 {
		what = "Claims " + strings.Join(ex.Claims, ", ")
	}
	if ex.Pod != "" {
		what = fmt.Sprintf("Pod %s (%s)", ex.Pod, strings.ToLower(what[:1])+what[1:])
	}
	fit := ex.Fitting()
	switch len(fit) {
	case 0:
		fmt.Fprintf(&b, "%s fits on no node (0 of %d).\n", what, len(ex.Nodes))
	default:
		fmt.Fprintf(&b, "%s fits on %d of %d nodes: %s.\n", what, len(fit), len(ex.Nodes), strings.Join(fit, ", "))
	}
	for _, n := range ex.Notes {
		fmt.Fprintf(&b, "Note: %s.\n", n)
	}
	for i := range ex.Nodes {
		v := &ex.Nodes[i]
		b.WriteString("\n")
		if v.Fits {
			fmt.Fprintf(&b, "Node %s: fits. The allocator would pick:\n", v.Node)
			for _, line := range pickLines(v) {
				fmt.Fprintf(&b, "  %s\n", line)
			}
			continue
		}
		fmt.Fprintf(&b, "Node %s: does not fit.\n", v.Node)
		for _, r := range v.Reasons {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
		for j := range v.Requests {
			r := &v.Requests[j]
			if r.Problem != "" || len(r.Selectors) == 0 || r.ClassMatched == 0 || r.Enough {
				continue
			}
			fmt.Fprintf(&b, "  request %s selectors, each alone over the %d devices class %s matches:\n", requestLabel(v, r), r.ClassMatched, r.Class)
			for k, s := range r.Selectors {
				fmt.Fprintf(&b, "    selector %d matched %d: %s\n", k+1, s.Matched, s.Expression)
				if s.Errors > 0 {
					fmt.Fprintf(&b, "      failed on %d devices, e.g. %s\n", s.Errors, s.Error)
				}
			}
		}
	}
	return b.String()
}

// pickLines groups a node's picks by claim and request: "request gpus:
// gpu-0, gpu-1".
func pickLines(v *NodeVerdict) []string {
	var lines []string
	multi := false
	for _, p := range v.Devices {
		if p.Claim != v.Devices[0].Claim {
			multi = true
		}
	}
	var cur string
	var devs []string
	flush := func() {
		if cur != "" {
			lines = append(lines, fmt.Sprintf("%s: %s", cur, strings.Join(devs, ", ")))
		}
	}
	for _, p := range v.Devices {
		label := "request " + p.Request
		if multi {
			label = p.Claim + " request " + p.Request
		}
		if label != cur {
			flush()
			cur, devs = label, nil
		}
		d := p.Device
		if p.Pool != v.Node {
			d = p.Pool + "/" + d
		}
		if p.Shared {
			d += " (a share"
			if len(p.Consumed) > 0 {
				d += " of " + strings.Join(p.Consumed, ", ")
			}
			d += ")"
		}
		devs = append(devs, d)
	}
	flush()
	return lines
}

// PrintGang prints gx as text (the members placed, then the first that
// fits nowhere, explained node by node), JSON or YAML.
func PrintGang(w io.Writer, gx *GangExplanation, output string) error {
	switch output {
	case inspect.OutputJSON:
		return inspect.WriteJSON(w, gx)
	case inspect.OutputYAML:
		return inspect.WriteYAML(w, gx)
	case inspect.OutputTable:
		_, err := io.WriteString(w, gangText(gx))
		return err
	}
	return CheckOutput(output)
}

func gangText(gx *GangExplanation) string {
	var b strings.Builder
	verdict := "does not fit"
	if gx.Fits {
		verdict = "fits"
	}
	fmt.Fprintf(&b, "PodGroup %s (a gang of minCount %d, %d pods) %s.\n", gx.Group, gx.MinCount, len(gx.Members), verdict)
	for _, n := range gx.Notes {
		fmt.Fprintf(&b, "Note: %s.\n", n)
	}
	if len(gx.Placed) > 0 {
		fmt.Fprintf(&b, "\nMembers placed one at a time with the scheduler's allocator, each holding its devices (one placement; the scheduler may find another):\n")
		for _, m := range gx.Placed {
			what := "already allocated"
			if !m.Allocated {
				v := NodeVerdict{Node: m.Node, Devices: m.Devices}
				what = strings.Join(pickLines(&v), "; ")
			}
			fmt.Fprintf(&b, "  %s on %s: %s\n", m.Pod, m.Node, what)
		}
	}
	if gx.Stuck != nil {
		fmt.Fprintf(&b, "\nThe first member that fits nowhere then:\n\n")
		b.WriteString(explanationText(gx.Stuck))
	}
	return b.String()
}
