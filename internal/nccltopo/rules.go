package nccltopo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Limits of NCCL's and RCCL's topology parser (src/graph/xml.h, topo.h):
// names and values shorter than MAX_STR_LEN (255) with the terminator and
// the closing quote, MAX_ATTR_COUNT attributes an element, MAX_SUBS
// children (RCCL's 512, the smaller), NCCL_TOPO_XML_MAX_NODES elements
// (NCCL's 256, which also holds the NICs NCCL adds).
const (
	maxStrLen   = 253
	maxAttrs    = 16
	maxSubs     = 512
	maxNodes    = 256
	maxFileSize = 16 << 10
)

// Dialect is the library a file is checked for.
type Dialect int

const (
	// NCCL: system version 1, gpu links are nvlink (and c2c).
	NCCL Dialect = iota
	// RCCL: system version 2, gpu links are xgmi.
	RCCL
)

// rule is what the parser accepts of one element.
type rule struct {
	// subs are the child elements the loader has a handler for; any
	// other is ignored by NCCL, and refused here.
	subs []string
	// required attributes, read without a default and not filled in by
	// the library itself when missing.
	required []string
	// optional attributes the library reads (or fills when missing).
	optional []string
}

func rules(d Dialect) map[string]rule {
	gpuSubs, gpuOpt := []string{"nvlink", "c2c"}, []string{"gdr", "mlopart", "keep"}
	if d == RCCL {
		gpuSubs, gpuOpt = []string{"xgmi"}, []string{"gdr", "gcn", "arch", "keep"}
	}
	link := rule{required: []string{"target", "count", "tclass"}}
	return map[string]rule{
		"system": {subs: []string{"cpu"}, required: []string{"version"}, optional: []string{"name"}},
		"cpu": {subs: []string{"pci", "nic"}, required: []string{"numaid"},
			optional: []string{"host_hash", "affinity", "arch", "vendor", "familyid", "modelid"}},
		"pci": {subs: []string{"pci", "gpu", "nic", "pcilink"}, required: []string{"busid", "class", "link_speed", "link_width"},
			optional: []string{"vendor", "device", "subsystem_vendor", "subsystem_device", "keep"}},
		"gpu":     {subs: gpuSubs, required: []string{"dev", "sm", "rank"}, optional: gpuOpt},
		"nvlink":  link,
		"xgmi":    link,
		"c2c":     {required: []string{"bw", "count"}},
		"pcilink": {required: []string{"target"}, optional: []string{"class"}},
		"nic":     {subs: []string{"net"}},
		"net": {required: []string{"dev"}, optional: []string{"name", "speed", "port", "latency", "guid", "maxconn", "gdr",
			"coll", "keep", "rail", "plane", "net", "gin", "rma"}},
	}
}

// linkSpeeds are the link_speed values NCCL and RCCL know (kvDictPciGen);
// any other falls back to Gen3's bandwidth.
var linkSpeeds = []string{"2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s",
	"2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"}

// cpuVendors are kvDictCpuVendor's names.
var cpuVendors = []string{"GenuineIntel", "AuthenticAMD", "CentaurHauls", "  Shanghai  "}

// Check reports the first way data breaks what d's parser and topology
// builder accept: the grammar (xmlGetNode: elements and attributes split by
// single spaces, values in quotes with no markup, no tabs; comments; every
// element closed by its own name), the limits above, the elements each
// loader handles and where, the attributes each reads without a default,
// and their formats (bus IDs lowercase 0000:00:00.0 as NCCL prints them,
// classes 0x and six hex digits, integers decimal since strtol would read
// a leading 0 as octal, link speeds from kvDictPciGen, CPU arch and vendor
// from their dictionaries). It also checks what makes the file mean one
// thing: one gpu per pci element, bus IDs, ranks and devs unique.
func Check(data []byte, d Dialect) error {
	if len(data) > maxFileSize {
		return fmt.Errorf("%d bytes, more than %d", len(data), maxFileSize)
	}
	p := &parser{s: string(data)}
	root, err := p.parse()
	if err != nil {
		return err
	}
	c := &checker{d: d, rules: rules(d), busIDs: map[string]bool{}, ranks: map[string]bool{}, devs: map[string]bool{}}
	if root.name != "system" {
		return fmt.Errorf("top element is %q, want system", root.name)
	}
	if err := c.element(root, "system"); err != nil {
		return err
	}
	if c.nodes > maxNodes {
		return fmt.Errorf("%d elements, more than %d", c.nodes, maxNodes)
	}
	return nil
}

type checker struct {
	d                   Dialect
	rules               map[string]rule
	nodes               int
	busIDs, ranks, devs map[string]bool
}

func (c *checker) element(e *element, path string) error {
	c.nodes++
	r := c.rules[e.name]
	if len(e.attrs) > maxAttrs {
		return fmt.Errorf("%s: %d attributes, more than %d", path, len(e.attrs), maxAttrs)
	}
	if len(e.subs) > maxSubs {
		return fmt.Errorf("%s: %d children, more than %d", path, len(e.subs), maxSubs)
	}
	seen := map[string]string{}
	for _, a := range e.attrs {
		if _, dup := seen[a.key]; dup {
			return fmt.Errorf("%s: attribute %s twice", path, a.key)
		}
		seen[a.key] = a.value
		if !slices.Contains(r.required, a.key) && !slices.Contains(r.optional, a.key) {
			return fmt.Errorf("%s: attribute %s is not one the parser reads", path, a.key)
		}
		if err := c.value(e.name, a.key, a.value); err != nil {
			return fmt.Errorf("%s: %s=%q: %w", path, a.key, a.value, err)
		}
	}
	for _, k := range r.required {
		if _, ok := seen[k]; !ok {
			return fmt.Errorf("%s: attribute %s is required", path, k)
		}
	}
	if err := c.semantics(e, seen, path); err != nil {
		return err
	}
	gpus := 0
	for i, s := range e.subs {
		if !slices.Contains(r.subs, s.name) {
			return fmt.Errorf("%s: element %s is not one the parser reads here (%v)", path, s.name, r.subs)
		}
		if s.name == "gpu" {
			gpus++
		}
		if err := c.element(s, fmt.Sprintf("%s/%s[%d]", path, s.name, i)); err != nil {
			return err
		}
	}
	if gpus > 1 {
		return fmt.Errorf("%s: %d gpu elements, NCCL reads one a pci element", path, gpus)
	}
	return nil
}

func (c *checker) semantics(e *element, a map[string]string, path string) error {
	switch e.name {
	case "system":
		want := "1"
		if c.d == RCCL {
			want = "2"
		}
		if a["version"] != want {
			return fmt.Errorf("%s: version %s, the library reads only %s", path, a["version"], want)
		}
	case "cpu":
		if a["arch"] == "x86_64" {
			if v, ok := a["vendor"]; ok && v == "GenuineIntel" {
				for _, k := range []string{"familyid", "modelid"} {
					if _, ok := a[k]; !ok {
						return fmt.Errorf("%s: an Intel CPU needs %s", path, k)
					}
				}
			}
		}
	case "pci":
		if c.busIDs[a["busid"]] {
			return fmt.Errorf("%s: bus ID %s twice", path, a["busid"])
		}
		c.busIDs[a["busid"]] = true
	case "gpu":
		if c.ranks[a["rank"]] {
			return fmt.Errorf("%s: rank %s twice", path, a["rank"])
		}
		c.ranks[a["rank"]] = true
	}
	return nil
}

// value checks one attribute's format.
func (c *checker) value(tag, key, v string) error {
	switch key {
	case "busid":
		if !validBusID(v) {
			return fmt.Errorf("not a lowercase bus ID 0000:00:00.0")
		}
	case "target":
		if !validBusID(v) && v != NVSwitchTarget {
			return fmt.Errorf("not a lowercase bus ID 0000:00:00.0 nor %s", NVSwitchTarget)
		}
	case "class", "tclass":
		if !isHexN(v, 6) {
			return fmt.Errorf("not a PCI class 0x and six hex digits")
		}
	case "link_speed":
		if !slices.Contains(linkSpeeds, v) {
			return fmt.Errorf("not a link speed the library knows")
		}
	case "arch":
		if tag == "cpu" && !slices.Contains(cpuArches, v) {
			return fmt.Errorf("not one of %v", cpuArches)
		}
		if tag == "gpu" {
			return decimal(v, 0)
		}
	case "vendor":
		if tag == "cpu" && !slices.Contains(cpuVendors, v) {
			return fmt.Errorf("not one of %q", cpuVendors)
		}
		if tag == "pci" && !isHexN(v, 4) && !isHexN(v, 0) {
			return fmt.Errorf("not a hex ID")
		}
	case "device", "subsystem_vendor", "subsystem_device", "host_hash", "guid":
		if !isHexN(v, 0) {
			return fmt.Errorf("not a 0x hex number")
		}
	case "affinity":
		for _, w := range strings.Split(v, ",") {
			if len(w) == 0 || len(w) > 8 || strings.Trim(w, "0123456789abcdef") != "" {
				return fmt.Errorf("not a CPU mask of 32-bit hex words")
			}
		}
	case "numaid":
		return decimal(v, -1)
	case "gcn":
		if !strings.HasPrefix(v, "gfx") || len(v) < 6 {
			return fmt.Errorf("not an LLVM target gfxNNN")
		}
	case "latency":
		if _, err := strconv.ParseFloat(v, 32); err != nil {
			return fmt.Errorf("not a number")
		}
	case "name":
	case "count", "link_width", "version", "sm", "dev", "rank", "familyid", "modelid", "bw", "speed", "port", "maxconn", "mlopart", "rail", "plane":
		min := 0
		if key == "count" || key == "version" {
			min = 1
		}
		return decimal(v, min)
	case "gdr", "keep", "coll", "net", "gin", "rma":
		if v != "0" && v != "1" {
			return fmt.Errorf("not 0 or 1")
		}
	}
	return nil
}

// decimal: an integer strtol(s, NULL, 0) reads as written, at least min.
func decimal(s string, min int) error {
	n, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(n) != s {
		return fmt.Errorf("not a decimal integer (no sign but -, no leading zero)")
	}
	if n < min {
		return fmt.Errorf("less than %d", min)
	}
	return nil
}

// isHexN: 0x and n lowercase-or-uppercase hex digits (any number ≥ 1 when n is 0).
func isHexN(s string, n int) bool {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || h == "" || (n > 0 && len(h) != n) || len(h) > 16 {
		return false
	}
	return strings.Trim(h, "0123456789abcdefABCDEF") == ""
}

// validBusID: a lowercase extended BDF as NCCL prints bus IDs (%04x:%02x:%02x.%x).
func validBusID(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, ch := range []byte(s) {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
			return false
		}
	}
	return s[11] <= '7'
}
