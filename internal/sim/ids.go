package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/pci"
)

// Identifiers the simulator makes up: they must look like the real ones
// (so code that parses them is exercised), be stable for one node across
// restarts, and differ between nodes (so a cluster of simulated nodes has
// no two GPUs with one UUID).

// digest hashes the parts with separators that cannot occur inside them.
func digest(parts ...string) [32]byte {
	return sha256.Sum256([]byte(strings.Join(parts, "\x00")))
}

// uuidString formats 16 bytes as 8-4-4-4-12 hex, the layout nvidia-smi
// prints after GPU- and MIG-.
func uuidString(b []byte) string {
	h := hex.EncodeToString(b[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// gpuUUID derives a GPU's UUID from the node, the machine and the GPU's
// index: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" for NVIDIA (the format
// nvidia-smi -L prints) and 16 hex digits for AMD (the 64-bit unique id the
// amdgpu driver exposes, as rocm-smi prints it without its 0x).
func gpuUUID(vendor inventory.Vendor, nodeName, machine string, index int) string {
	d := digest("tessera-sim-gpu", nodeName, machine, strconv.Itoa(index))
	if vendor == inventory.VendorAMD {
		return fmt.Sprintf("%016x", binary.BigEndian.Uint64(d[:8]))
	}
	return "GPU-" + uuidString(d[:])
}

// partitionUUID derives a partition's UUID. seed must be unique per
// partition ever created on the node: the machine file's partitions use
// their position in the file, created ones a serial number and the boot
// id, so that a partition re-created after a reboot gets a new UUID as it
// would on real hardware.
func partitionUUID(kind inventory.PartitionKind, parentUUID string, seed ...string) string {
	d := digest(append([]string{"tessera-sim-partition", parentUUID}, seed...)...)
	if kind == inventory.PartitionXCP {
		return fmt.Sprintf("%016x", binary.BigEndian.Uint64(d[:8]))
	}
	return "MIG-" + uuidString(d[:])
}

var driverVersionRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,3}`)

// SemverFromDriver turns a driver version as the driver reports it
// (580.65.06, 550.54.15, 6.12.12) into a semver-compatible version for the
// driverVersion attribute: leading zeros dropped (580.65.6), missing parts
// filled with 0 (575.51 -> 575.51.0), anything after the first three
// numeric parts (a fourth part, -suffixes) dropped. It returns "" when the
// input does not start with a number.
func SemverFromDriver(v string) string {
	m := driverVersionRE.FindString(strings.TrimSpace(v))
	if m == "" {
		return ""
	}
	parts := strings.Split(m, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	out := make([]string, 3)
	for i := range out {
		n, err := strconv.ParseUint(parts[i], 10, 64)
		if err != nil {
			return ""
		}
		out[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(out, ".")
}

// semverFromDotted turns "9.0" or "9.4.2" into "9.0.0" / "9.4.2"; "" when
// the input is not one to three dot-separated numbers.
func semverFromDotted(v string) string {
	if v == "" || strings.Trim(v, "0123456789.") != "" || strings.Count(v, ".") > 2 {
		return ""
	}
	return SemverFromDriver(v)
}

// normalizePCIBusID checks an extended BDF and returns it lowercase with a
// 4-digit domain where the domain fits (nvidia-smi prints 8 digits, sysfs 4).
func normalizePCIBusID(s string) (string, bool) {
	id, err := pci.Normalize(s)
	return id, err == nil
}

// migGPUInstanceID returns the GPU instance id NVIDIA gives an instance at a
// placement. The ids form a binary tree over the 8 memory slices: 0 is the
// whole GPU, 1-2 the halves, 3-6 the quarters, 7-14 the eighths, so an
// instance's id follows from its placement: the -lgi listings in the MIG
// user guide (3g.20gb at 4:4 is id 2, 2g.10gb at 2:2 id 4, 1g.5gb at 0:1 id
// 7) and public nvidia-smi captures (seven 1g.10gb on H100 are ids 7-13 at
// 0:1-6:1) all fit it. ok=false when the placement does not fit the tree
// (a table that is not power-of-two aligned).
func migGPUInstanceID(totalSlices int, p inventory.Placement) (int, bool) {
	if p.Size <= 0 || totalSlices%p.Size != 0 || p.Start%p.Size != 0 {
		return 0, false
	}
	width := totalSlices / p.Size
	if width&(width-1) != 0 {
		return 0, false
	}
	return width - 1 + p.Start/p.Size, true
}
