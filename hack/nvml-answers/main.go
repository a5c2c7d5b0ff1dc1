//go:build cgo && linux

// Command nvml-answers prints, read-only, the NVML answers the nvml
// backend's discovery depends on (issue #43, docs/nvml.md): per GPU the SM
// count calls, fabric info, and per NVLink the remote device type, remote
// PCI info and the speed field. It changes nothing (no MIG mode, no reset).
// Run by hack/gpu-readonly-checks.sh.
package main

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func main() {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		fmt.Println("nvmlInit:", nvml.ErrorString(ret))
		os.Exit(1)
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	fmt.Println("nvmlDeviceGetCount:", n, nvml.ErrorString(ret))
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		fmt.Printf("\nGPU %d nvmlDeviceGetHandleByIndex: %s\n", i, nvml.ErrorString(ret))
		if ret != nvml.SUCCESS {
			continue
		}
		gpu(d)
	}
}

func gpu(d nvml.Device) {
	uuid, ret := d.GetUUID()
	fmt.Println("  GetUUID:", uuid, nvml.ErrorString(ret))
	a, ret := d.GetAttributes()
	fmt.Println("  GetAttributes (SMs):", a.MultiprocessorCount, nvml.ErrorString(ret))
	cores, ret := d.GetNumGpuCores()
	fmt.Println("  GetNumGpuCores:", cores, nvml.ErrorString(ret))
	major, minor, ret := d.GetCudaComputeCapability()
	fmt.Printf("  GetCudaComputeCapability: %d.%d %s\n", major, minor, nvml.ErrorString(ret))
	f, ret := d.GetGpuFabricInfo()
	fmt.Printf("  GetGpuFabricInfo: state %d status %d cluster %x clique %d %s\n", f.State, f.Status, f.ClusterUuid, f.CliqueId, nvml.ErrorString(ret))
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		state, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS {
			if l == 0 {
				fmt.Println("  GetNvLinkState(0):", nvml.ErrorString(ret))
			}
			continue
		}
		link(d, l, state)
	}
}

func link(d nvml.Device, l int, state nvml.EnableState) {
	typ, tret := d.GetNvLinkRemoteDeviceType(l)
	pci, pret := d.GetNvLinkRemotePciInfo(l)
	ver, vret := d.GetNvLinkVersion(l)
	vals := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_GET_SPEED, ScopeId: uint32(l)}}
	fret := d.GetFieldValues(vals)
	bus := make([]byte, 0, 16)
	for _, c := range pci.BusId {
		if c == 0 {
			break
		}
		bus = append(bus, byte(c))
	}
	fmt.Printf("  link %2d: state %d; remote type %d %s; remote pci %q %s; version %d %s; speed field: call %s, field %s, type %d, value %d\n",
		l, state, typ, nvml.ErrorString(tret), bus, nvml.ErrorString(pret), ver, nvml.ErrorString(vret),
		nvml.ErrorString(fret), nvml.ErrorString(nvml.Return(vals[0].NvmlReturn)), vals[0].ValueType, binary.LittleEndian.Uint64(vals[0].Value[:]))
}
