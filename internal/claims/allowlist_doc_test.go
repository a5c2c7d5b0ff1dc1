package claims

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// The allowlist of container edits is the table in docs/security.md; the
// test reads it from there, so the page and the check cannot drift.
const allowlistDoc = "docs/security.md"

// allowRow is one row of the allowlist table.
type allowRow struct {
	line       int
	kind       string // rowDevice, rowEnv, rowMount, rowVendor
	container  string // pattern, with placeholders
	host       string // pattern; "" for env
	options    []string
	vendorKind string // rowVendor: the CDI kind of the vendor spec
	hits       int    // edits it allowed, over all cases
}

const (
	rowDevice = "device"
	rowEnv    = "env"
	rowMount  = "mount"
	rowVendor = "vendor spec"
)

func (r *allowRow) String() string {
	if r.kind == rowVendor {
		return fmt.Sprintf("line %d: vendor spec %s", r.line, r.vendorKind)
	}
	return fmt.Sprintf("line %d: %s %s", r.line, r.kind, r.container)
}

// binding is what a claim's placeholders may stand for: its devices'
// numbers and UUIDs, the node's directories.
type binding struct {
	uid                          string
	minors, caps, cards, renders map[string]bool
	uuids                        map[string]bool // the claim's NVIDIA devices
	amdUUIDs                     map[string]bool // its whole AMD GPUs, as ROCm names them (GPU-<unique id>)
	channels                     map[string]bool // its IMEX channels' numbers
	groups                       map[string]bool // the IOMMU groups of the GPUs it passes through
	devRoot, mpsRoot, cdiDir     string
}

// placeholder is how one placeholder of the table is matched: a literal
// value of the binding, or a pattern whose match the binding checks.
type placeholder struct {
	literal func(b *binding) string
	re      string
	ok      func(b *binding, v string) bool
}

func inSet(set func(b *binding) map[string]bool) func(*binding, string) bool {
	return func(b *binding, v string) bool { return set(b)[v] }
}

// placeholders are the table's placeholders; the page's placeholder table
// must list exactly these.
var placeholders = map[string]placeholder{
	"minor":     {re: `[0-9]+`, ok: inSet(func(b *binding) map[string]bool { return b.minors })},
	"cap":       {re: `[0-9]+`, ok: inSet(func(b *binding) map[string]bool { return b.caps })},
	"card":      {re: `[0-9]+`, ok: inSet(func(b *binding) map[string]bool { return b.cards })},
	"render":    {re: `[0-9]+`, ok: inSet(func(b *binding) map[string]bool { return b.renders })},
	"channel":   {re: `[0-9]+`, ok: inSet(func(b *binding) map[string]bool { return b.channels })},
	"group":     {re: `[0-9]+`, ok: inSet(func(b *binding) map[string]bool { return b.groups })},
	"uuids":     {re: `[^,\x00]+(?:,[^,\x00]+)*`, ok: func(b *binding, v string) bool { return uuidList(b.uuids, v) }},
	"amd-uuids": {re: `[^,\x00]+(?:,[^,\x00]+)*`, ok: func(b *binding, v string) bool { return uuidList(b.amdUUIDs, v) }},
	"cdi-dir":   {literal: func(b *binding) string { return b.cdiDir }},
	"uid":       {literal: func(b *binding) string { return b.uid }},
	"percent": {re: `[0-9]+`, ok: func(_ *binding, v string) bool {
		n, err := strconv.Atoi(v)
		return err == nil && n >= 1 && n <= 100
	}},
	"limits": {re: `[0-9]+=[0-9]+M(?:,[0-9]+=[0-9]+M)*`, ok: func(b *binding, v string) bool {
		seen := map[string]bool{}
		for _, l := range strings.Split(v, ",") {
			ord, mib, _ := strings.Cut(l, "=")
			n, err := strconv.Atoi(ord)
			if err != nil || n >= len(b.uuids) || seen[ord] || mib == "0M" {
				return false
			}
			seen[ord] = true
		}
		return true
	}},
	"dev-root": {literal: func(b *binding) string { return b.devRoot }},
	"mps-root": {literal: func(b *binding) string { return b.mpsRoot }},
	"daemon": {re: `[^/\x00]+`, ok: func(b *binding, v string) bool {
		return v == b.uid || strings.HasPrefix(v, "share-") && b.uuids[strings.TrimPrefix(v, "share-")]
	}},
}

// uuidList: v names devices of set, comma-separated, each once.
func uuidList(set map[string]bool, v string) bool {
	seen := map[string]bool{}
	for _, u := range strings.Split(v, ",") {
		if !set[u] || seen[u] {
			return false
		}
		seen[u] = true
	}
	return true
}

var (
	codeSpan      = regexp.MustCompile("`([^`]*)`")
	placeholderRE = regexp.MustCompile(`<([a-z-]+)>`)
)

// readAllowlist parses the page's allowlist and placeholder tables.
func readAllowlist(t *testing.T) []*allowRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", allowlistDoc))
	if err != nil {
		t.Fatal(err)
	}
	var rows []*allowRow
	documented := map[string]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if strings.HasPrefix(cells[0], "---") || cells[0] == "kind" || cells[0] == "placeholder" {
			continue
		}
		code := func(cell string) []string {
			var out []string
			for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
				out = append(out, m[1])
			}
			return out
		}
		switch len(cells) {
		case 2: // placeholder | stands for
			for _, c := range code(cells[0]) {
				documented[strings.Trim(c, "<>")] = true
			}
		case 6: // kind | in the container | from the host | options | when | why
			r := &allowRow{line: i + 1, kind: cells[0], options: code(cells[3])}
			if cells[4] == "" || cells[5] == "" {
				t.Errorf("%s line %d says no when or no why", allowlistDoc, r.line)
			}
			c, h := code(cells[1]), code(cells[2])
			switch r.kind {
			case rowVendor:
				if len(c) != 1 {
					t.Fatalf("%s line %d: a vendor spec row names one CDI kind, got %q", allowlistDoc, r.line, c)
				}
				r.vendorKind = c[0]
			case rowEnv, rowDevice, rowMount:
				if len(c) != 1 || (r.kind == rowEnv) != (len(h) == 0) && r.kind != rowDevice || len(h) > 1 {
					t.Fatalf("%s line %d: want one container pattern and, but for env (none) and a device the runtime makes (none), one host pattern; got %q and %q", allowlistDoc, r.line, c, h)
				}
				r.container = c[0]
				switch {
				case len(h) == 1:
					r.host = h[0]
				case r.kind == rowDevice:
					r.host = noHostNode
				}
				if r.kind == rowEnv && len(r.options) > 0 {
					t.Fatalf("%s line %d: an env row has no options", allowlistDoc, r.line)
				}
			default:
				t.Fatalf("%s line %d: unknown kind %q (the test knows %s, %s, %s and %s)", allowlistDoc, r.line, r.kind, rowDevice, rowEnv, rowMount, rowVendor)
			}
			for _, m := range placeholderRE.FindAllStringSubmatch(r.container+r.host, -1) {
				if _, ok := placeholders[m[1]]; !ok {
					t.Fatalf("%s line %d: placeholder <%s> is not one the test knows", allowlistDoc, r.line, m[1])
				}
			}
			rows = append(rows, r)
		default:
			t.Fatalf("%s line %d: a table row with %d cells", allowlistDoc, i+1, len(cells))
		}
	}
	for name := range placeholders {
		if !documented[name] {
			t.Errorf("%s: placeholder <%s> is not in the placeholder table", allowlistDoc, name)
		}
	}
	for name := range documented {
		if _, ok := placeholders[name]; !ok {
			t.Errorf("%s: the placeholder table lists <%s>, which the test does not know", allowlistDoc, name)
		}
	}
	if len(rows) < 10 {
		t.Fatalf("read %d allowlist rows from %s; the parse is broken", len(rows), allowlistDoc)
	}
	return rows
}

// noHostNode is the host side of a device node the runtime makes in the
// container from the spec's numbers: a row with no host pattern.
const noHostNode = "(made by the runtime)"

// edit is one container edit, from a CDI spec or as injected into an OCI
// spec, in the table's terms.
type edit struct {
	kind      string // a row kind, or what no row can allow (hook, ...)
	container string
	host      string // "" where unknown: an OCI device keeps no host path
	options   []string
	// bad says what else is wrong with it.
	bad string
}

func (e edit) String() string {
	s := e.kind + " " + e.container
	if e.host != "" {
		s += " from " + e.host
	}
	if len(e.options) > 0 {
		s += " (" + strings.Join(e.options, ",") + ")"
	}
	return s
}

func (e edit) key() string { return e.kind + "\x00" + e.container }

// cdiEdits are the edits of one CDI ContainerEdits.
func cdiEdits(ce cdispec.ContainerEdits) []edit {
	var out []edit
	for _, v := range ce.Env {
		out = append(out, edit{kind: rowEnv, container: v})
	}
	for _, n := range ce.DeviceNodes {
		e := edit{kind: rowDevice, container: n.Path, host: n.HostPath}
		if n.HostPath == "" {
			// A node with its numbers and no host path: the runtime
			// makes it in the container.
			e.host = noHostNode
		}
		if n.FileMode != nil {
			e.options = append(e.options, fmt.Sprintf("mode=%#o", uint32(*n.FileMode)))
		}
		if n.Permissions != "" {
			e.options = append(e.options, "perm="+n.Permissions)
		}
		switch {
		case n.Type != "" && n.Type != "c":
			e.bad = "type " + n.Type + ", not a character device"
		case n.UID != nil || n.GID != nil:
			e.bad = "sets an owner"
		}
		out = append(out, e)
	}
	for _, m := range ce.Mounts {
		e := edit{kind: rowMount, container: m.ContainerPath, host: m.HostPath, options: m.Options}
		if m.Type != "" {
			e.bad = "mount type " + m.Type
		}
		out = append(out, e)
	}
	for _, h := range ce.Hooks {
		out = append(out, edit{kind: "hook", container: h.HookName + " " + h.Path + " " + strings.Join(h.Args, " ")})
	}
	for _, n := range ce.NetDevices {
		out = append(out, edit{kind: "net device", container: n.Name, host: n.HostInterfaceName})
	}
	if ce.IntelRdt != nil {
		out = append(out, edit{kind: "intelRdt", container: ce.IntelRdt.ClosID})
	}
	for _, g := range ce.AdditionalGIDs {
		out = append(out, edit{kind: "additional GID", container: strconv.Itoa(int(g))})
	}
	return out
}

// ociEdits are what injection put into an OCI spec that started empty.
func ociEdits(s *specs.Spec) []edit {
	var out []edit
	for _, v := range s.Process.Env {
		out = append(out, edit{kind: rowEnv, container: v})
	}
	for _, d := range s.Linux.Devices {
		e := edit{kind: rowDevice, container: d.Path}
		if d.Type != "c" {
			e.bad = "type " + d.Type + ", not a character device"
		}
		out = append(out, e)
	}
	for _, m := range s.Mounts {
		e := edit{kind: rowMount, container: m.Destination, host: m.Source, options: m.Options}
		if m.Type != "" && m.Type != "bind" {
			e.bad = "mount type " + m.Type
		}
		out = append(out, e)
	}
	if h := s.Hooks; h != nil {
		for name, hooks := range map[string][]specs.Hook{
			"prestart": h.Prestart, "createRuntime": h.CreateRuntime, "createContainer": h.CreateContainer,
			"startContainer": h.StartContainer, "poststart": h.Poststart, "poststop": h.Poststop,
		} {
			for _, k := range hooks {
				out = append(out, edit{kind: "hook", container: name + " " + k.Path + " " + strings.Join(k.Args, " ")})
			}
		}
	}
	for _, g := range s.Process.User.AdditionalGids {
		out = append(out, edit{kind: "additional GID", container: strconv.Itoa(int(g))})
	}
	for name := range s.Linux.NetDevices {
		out = append(out, edit{kind: "net device", host: name})
	}
	if s.Linux.IntelRdt != nil {
		out = append(out, edit{kind: "intelRdt", container: s.Linux.IntelRdt.ClosID})
	}
	return out
}

// rowMatcher is a row compiled for one claim's binding.
type rowMatcher struct {
	row               *allowRow
	full, containerRE *regexp.Regexp
	fullPH, contPH    []string // the placeholder of each capture group
}

func compile(pattern string, b *binding) (*regexp.Regexp, []string) {
	var groups []string
	var sb strings.Builder
	sb.WriteString("^")
	rest := pattern
	for {
		loc := placeholderRE.FindStringSubmatchIndex(rest)
		if loc == nil {
			sb.WriteString(regexp.QuoteMeta(rest))
			break
		}
		sb.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		name := rest[loc[2]:loc[3]]
		p := placeholders[name]
		if p.literal != nil {
			sb.WriteString(regexp.QuoteMeta(p.literal(b)))
		} else {
			sb.WriteString("(" + p.re + ")")
			groups = append(groups, name)
		}
		rest = rest[loc[1]:]
	}
	sb.WriteString("$")
	return regexp.MustCompile(sb.String()), groups
}

// matchers compiles the table's env, device and mount rows for b.
func matchers(rows []*allowRow, b *binding) []rowMatcher {
	var out []rowMatcher
	for _, r := range rows {
		if r.kind == rowVendor {
			continue
		}
		m := rowMatcher{row: r}
		m.containerRE, m.contPH = compile(r.container, b)
		m.full, m.fullPH = compile(r.container+"\x00"+r.host, b)
		out = append(out, m)
	}
	return out
}

// bound reports whether the captures of re on s are values b allows, the
// same value wherever a placeholder repeats.
func bound(re *regexp.Regexp, groups []string, s string, b *binding) bool {
	sub := re.FindStringSubmatch(s)
	if sub == nil {
		return false
	}
	seen := map[string]string{}
	for i, name := range groups {
		v := sub[i+1]
		if prev, ok := seen[name]; ok && prev != v {
			return false
		}
		seen[name] = v
		if !placeholders[name].ok(b, v) {
			return false
		}
	}
	return true
}

// allow returns the row that allows e under b, or nil.
func allow(ms []rowMatcher, e edit, b *binding) *allowRow {
	if e.bad != "" {
		return nil
	}
	for _, m := range ms {
		if m.row.kind != e.kind {
			continue
		}
		// A spec's mount and device node carry their options (an injected
		// OCI node, host "", keeps none of the spec's).
		if (e.kind == rowMount || e.kind == rowDevice && e.host != "") && !slices.Equal(slices.Sorted(slices.Values(e.options)), slices.Sorted(slices.Values(m.row.options))) {
			continue
		}
		var ok bool
		if e.kind == rowEnv || e.host == "" {
			ok = bound(m.containerRE, m.contPH, e.container, b)
		} else {
			ok = bound(m.full, m.fullPH, e.container+"\x00"+e.host, b)
		}
		if ok {
			return m.row
		}
	}
	return nil
}
