//go:build cgo && linux

package nvml

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Link bandwidth. Where the driver reports a link's speed, that is what is
// counted: field NVML_FI_DEV_NVLINK_GET_SPEED (164, "NVLink Speed in
// MBps", the link in scopeId; nvml.h), one nvmlDeviceGetFieldValues call
// for all of a GPU's up links. It covers every link (the older
// NVML_FI_DEV_NVLINK_SPEED_MBPS_L0..L11 fields stop at link 11, and Hopper
// and Blackwell GPUs have 18). A link whose field does not answer
// (NOT_SUPPORTED on older drivers, or any per-field error) counts the
// nominal figure of its NVLink version below. Bandwidth is summed in MB/s
// and published in whole GB/s (1 GB = 1000 MB, as nvidia-smi nvlink -s
// prints the same field), so 18 links of 26562 MB/s are 478 GB/s.

// perLinkGBps is one NVLink's nominal unidirectional bandwidth in GB/s by
// NVML's nvmlNvlinkVersion_t value, from NVIDIA's per-GPU totals:
//
//	1 (1.0, P100)  20: 4 links, 160 GB/s bidirectional (P100 whitepaper)
//	2 (2.0, V100)  25: 6 links, 300 GB/s (V100 whitepaper)
//	3 (2.2)        25: NVLink 2 signalling (Turing/Volta-class parts)
//	4 (3.0, A100)  25: 12 links, 600 GB/s (A100 whitepaper)
//	5 (3.1, GA10x) 14: x4 bridge links, 112.5 GB/s over 4 links (RTX A6000 datasheet)
//	6 (4.0, H100)  25: 18 links, 900 GB/s (H100 datasheet; the sim's 450 GB/s one way)
//	7 (5.0, B200)  50: 18 links, 1.8 TB/s (Blackwell datasheet)
//
// Versions not listed give 0 and a log line rather than a guess.
var perLinkGBps = map[uint32]int64{1: 20, 2: 25, 3: 25, 4: 25, 5: 14, 6: 25, 7: 50}

// linkGBps returns a link's nominal bandwidth. Drivers before the version
// enum returned the NVLink major version (Blackwell: 5), which the enum
// reads as 3.1; a Blackwell GPU only has NVLink 5, so its architecture
// settles it.
func linkGBps(version uint32, arch string) int64 {
	if arch == "blackwell" {
		return 50
	}
	return perLinkGBps[version]
}

// gbps is a sum of MB/s in whole GB/s.
func gbps(mbps int64) int64 { return mbps / 1000 }

// linkSpeeds reads the speed field of every link in links, in MB/s; links
// whose field does not answer are absent (nominalMBps counts them).
func (b *Backend) linkSpeeds(h nvml.Device, g *inventory.GPU, links []int) map[int]int64 {
	if len(links) == 0 {
		return nil
	}
	vals := make([]nvml.FieldValue, len(links))
	for i, l := range links {
		vals[i] = nvml.FieldValue{FieldId: nvml.FI_DEV_NVLINK_GET_SPEED, ScopeId: uint32(l)}
	}
	if err := check("nvmlDeviceGetFieldValues(NVLINK_GET_SPEED)", h.GetFieldValues(vals)); err != nil {
		b.logger.V(2).Info("NVLink speed field unreadable; nominal speeds counted", "uuid", g.UUID, "err", err)
		return nil
	}
	out := map[int]int64{}
	for i, v := range vals {
		if mbps, ok := fieldInt(v); ok && mbps > 0 {
			out[links[i]] = mbps
			continue
		}
		b.logger.V(2).Info("NVLink speed field did not answer; nominal speed counted", "uuid", g.UUID, "link", links[i], "return", nvml.Return(v.NvmlReturn).Error())
	}
	return out
}

// nominalMBps is a link's speed by its NVLink version (perLinkGBps).
func (b *Backend) nominalMBps(h nvml.Device, g *inventory.GPU, link int) int64 {
	version, ret := h.GetNvLinkVersion(link)
	if err := check(fmt.Sprintf("nvmlDeviceGetNvLinkVersion(%d)", link), ret); err != nil {
		b.logger.Error(err, "NVLink version unknown; link counted without bandwidth", "uuid", g.UUID)
		return 0
	}
	bw := linkGBps(version, g.Architecture)
	if bw == 0 {
		b.logger.Info("unknown NVLink version; link counted without bandwidth", "uuid", g.UUID, "link", link, "version", version)
	}
	return bw * 1000
}

// fieldInt decodes a field value that answered as an integer. NVML fills
// the value union in the host's byte order, which is little-endian on
// every platform the driver ships for (x86-64, arm64).
func fieldInt(v nvml.FieldValue) (int64, bool) {
	if nvml.Return(v.NvmlReturn) != nvml.SUCCESS {
		return 0, false
	}
	le := binary.LittleEndian
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return int64(le.Uint32(v.Value[:4])), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return int64(int32(le.Uint32(v.Value[:4]))), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		u := le.Uint64(v.Value[:])
		return int64(min(u, math.MaxInt64)), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return int64(le.Uint64(v.Value[:])), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return int64(le.Uint16(v.Value[:2])), true
	case nvml.VALUE_TYPE_DOUBLE:
		return int64(math.Float64frombits(le.Uint64(v.Value[:]))), true
	}
	return 0, false
}
