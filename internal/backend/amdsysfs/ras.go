package amdsysfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
)

// amdgpu's RAS error counters in sysfs: <pci device>/ras/<block>_err_count,
// one file per RAS block the GPU supports (umc, gfx, sdma, mmhub,
// xgmi_wafl, ...). amdgpu_ras_sysfs_read prints "ue: %lu\nce: %lu\n"
// (uncorrectable, correctable), the UMC block on newer kernels a third
// line "de: %lu" (deferred), and "Query currently inaccessible\n" while
// the error query is not ready: from the start of a GPU reset
// (amdgpu_device_gpu_recover) until the device is back. The counts are the
// driver's, cumulative since it initialised the device.

// rasDir is the RAS directory below a PCI device directory.
const rasDir = "ras"

// rasSuffix ends the name of every error count file.
const rasSuffix = "_err_count"

// rasInaccessible is what amdgpu prints while the error query is not ready.
const rasInaccessible = "Query currently inaccessible"

var (
	// errNoRAS: the device has no ras directory (no RAS support, or the
	// driver is not bound).
	errNoRAS = errors.New("no RAS error counters")
	// errRASInaccessible: amdgpu says the error query is not ready (a GPU
	// reset in progress).
	errRASInaccessible = errors.New("RAS error query currently inaccessible (GPU reset in progress)")
)

// rasCount is one block's counts.
type rasCount struct {
	UE, CE uint64
}

// parseRASCount parses one *_err_count file. Lines other than ue and ce
// (de) are ignored; both ue and ce must be there.
func parseRASCount(b []byte) (rasCount, error) {
	s := strings.TrimSpace(string(b))
	if s == rasInaccessible {
		return rasCount{}, errRASInaccessible
	}
	var c rasCount
	var ue, ce bool
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return rasCount{}, fmt.Errorf("line %q is not \"name: count\"", truncate(line))
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k != "ue" && k != "ce" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return rasCount{}, fmt.Errorf("%s count %q is not a number", k, truncate(v))
		}
		if k == "ue" {
			c.UE, ue = n, true
		} else {
			c.CE, ce = n, true
		}
	}
	if !ue || !ce {
		return rasCount{}, errors.New("no ue and ce counts")
	}
	return c, nil
}

// readRAS reads every error count file of the PCI device directory dev
// (relative to the root). It returns errNoRAS without a ras directory and
// errRASInaccessible if any block says so (the query is device-wide). A
// block that cannot be read or parsed is left out and its error returned
// in bad, so one broken file does not hide the others.
func readRAS(r fsRoot, dev string) (blocks map[string]rasCount, bad map[string]error, err error) {
	dir := path.Join(dev, rasDir)
	entries, err := os.ReadDir(r.path(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, errNoRAS
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", r.path(dir), err)
	}
	blocks, bad = map[string]rasCount{}, map[string]error{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), rasSuffix)
		if !ok || name == "" {
			continue
		}
		b, err := r.read(path.Join(dir, e.Name()))
		if err != nil {
			bad[name] = err
			continue
		}
		c, err := parseRASCount(b)
		if errors.Is(err, errRASInaccessible) {
			return nil, nil, err
		}
		if err != nil {
			bad[name] = fmt.Errorf("%s: %w", r.path(path.Join(dir, e.Name())), err)
			continue
		}
		blocks[name] = c
	}
	if len(blocks) == 0 && len(bad) == 0 {
		return nil, nil, errNoRAS
	}
	return blocks, bad, nil
}

// blockNames returns the keys of m in order.
func blockNames(m map[string]rasCount) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
