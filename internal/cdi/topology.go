package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/fsutil"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/nccltopo"
)

// A claim that asked for an NCCL topology file (ClaimDevice.NCCLTopoFile,
// docs/training.md) gets, in its spec, one more CDI device every one of
// its devices' IDs names: the file mounted read-only at
// nccltopo.ContainerPath, NCCL_TOPO_FILE naming it, and the GPUs in the
// file's rank order in CUDA_VISIBLE_DEVICES (NVIDIA, GPU UUIDs) or
// HIP_VISIBLE_DEVICES (AMD, GPU-<unique id> UUIDs, as rocminfo prints
// them).
//
// The file lives in a directory of its own under the spec directory,
// <spec-dir>/k8s.gpu.tessera.dev-nccl-topo/<claim UID>.xml:
//   - it is the agent's already: the DaemonSet mounts the spec directory
//     at the same path on host and agent, so the path written into the
//     spec is the path the runtime bind-mounts, and no new host mount is
//     needed;
//   - it is on tmpfs (/var/run) like the spec, so a reboot takes both and
//     a spec is never found without its file; the spec rewritten from the
//     checkpoint writes the file again (claims' ensureSpec);
//   - CDI runtimes read only *.json and *.yaml files at the top of a spec
//     directory and watch only that level (fsnotify is not recursive), so
//     a file in a subdirectory is neither parsed as a spec nor makes the
//     runtimes reload their specs on every prepare.
//
// The file is written before the spec and removed after it (WriteClaim,
// RemoveClaimSpec): a spec on disk, which is what prepared means to the
// runtime, always finds its file whole (written atomically). A file whose
// spec is gone is the start-up sweep's (RemoveOrphanTopologyFiles) or the
// next unprepare's.

const (
	// ncclTopoDirName is the topology files' directory in the spec dir.
	ncclTopoDirName = Vendor + "-nccl-topo"
	ncclTopoFileExt = ".xml"
	// NCCLTopoFileEnv is the variable NCCL and RCCL read the file from.
	NCCLTopoFileEnv = "NCCL_TOPO_FILE"
)

// ncclTopoMountOptions: the container reads the file and nothing more.
var ncclTopoMountOptions = []string{"ro", "nosuid", "nodev", "noexec", "rbind"}

// TopologyPath is the host file holding the claim's NCCL topology file.
func (w *Writer) TopologyPath(claimUID string) string {
	return filepath.Join(w.specDir, ncclTopoDirName, claimUID+ncclTopoFileExt)
}

// ncclDeviceName is the CDI device name of a claim's topology edits; like
// mpsDeviceName it cannot collide with deviceName (its suffix starts with
// a letter).
func ncclDeviceName(claimUID string) string {
	return claimUID + "-nccl"
}

// wantsTopology reports whether the claim asked for a topology file.
func wantsTopology(devs []ClaimDevice) bool {
	for i := range devs {
		if devs[i].NCCLTopoFile {
			return true
		}
	}
	return false
}

// claimTopology builds the claim's topology file from node (the inventory
// its devices were resolved against), or returns nil when the claim did
// not ask for one. The claims package resolves the request
// (sharing.ResolveTopology); this refuses what it would have refused, so
// a hand-made device list cannot get a file describing other GPUs.
func claimTopology(devs []ClaimDevice, node *inventory.Node) (*nccltopo.File, error) {
	if !wantsTopology(devs) {
		return nil, nil
	}
	if node == nil {
		return nil, errors.New("NCCL topology file: no node inventory to write it from")
	}
	idx := make([]int, 0, len(devs))
	for _, d := range devs {
		if !d.NCCLTopoFile || d.Partition != nil || d.Sharing.IsShare() {
			return nil, fmt.Errorf("NCCL topology file: device %s/%s is not a whole GPU that asked for it", d.Pool, d.Device)
		}
		i := gpuIndex(node, d.GPU.UUID)
		if i < 0 {
			return nil, fmt.Errorf("NCCL topology file: GPU %s of device %s/%s is not in the node's inventory", d.GPU.UUID, d.Pool, d.Device)
		}
		idx = append(idx, i)
	}
	f, err := nccltopo.Build(node, idx, nccltopo.Options{})
	if err != nil {
		return nil, fmt.Errorf("NCCL topology file: %w", err)
	}
	return f, nil
}

func gpuIndex(n *inventory.Node, uuid string) int {
	for i := range n.GPUs {
		if n.GPUs[i].UUID == uuid {
			return i
		}
	}
	return -1
}

// ncclDevices are the claim's topology CDI device for f and, in a claim
// of several requests, one per request (scope.go) whose visible-devices
// variable lists that request's GPUs only, still in the file's rank order.
func (w *Writer) ncclDevices(claimUID string, f *nccltopo.File, node *inventory.Node, devs []ClaimDevice) ([]cdispec.Device, error) {
	whole, err := w.ncclDevice(claimUID, "", f, node, nil)
	if err != nil {
		return nil, err
	}
	out := []cdispec.Device{whole}
	suffixes, scoped := scopedDevices(devs)
	for _, sfx := range suffixes {
		in := map[string]bool{}
		for _, d := range scoped[sfx] {
			in[d.GPU.UUID] = true
		}
		nd, err := w.ncclDevice(claimUID, sfx, f, node, in)
		if err != nil {
			return nil, err
		}
		out = append(out, nd)
	}
	return out, nil
}

// ncclDevice is the topology CDI device for f of scope (the claim's: "",
// all GPUs; a request's: only the GPUs whose UUID only holds).
func (w *Writer) ncclDevice(claimUID, scope string, f *nccltopo.File, node *inventory.Node, only map[string]bool) (cdispec.Device, error) {
	ids := make([]string, 0, len(f.Order))
	for _, i := range f.Order {
		if only != nil && !only[node.GPUs[i].UUID] {
			continue
		}
		u := node.GPUs[i].UUID
		if f.Vendor == inventory.VendorAMD && !strings.HasPrefix(u, "GPU-") {
			// ROCm names a GPU by its unique id as "GPU-" and 16 hex
			// digits (rocminfo's Uuid), the form ROCR_ and
			// HIP_VISIBLE_DEVICES accept.
			u = "GPU-" + u
		}
		if u == "" || u == "GPU-" || strings.Contains(u, ",") {
			return cdispec.Device{}, fmt.Errorf("NCCL topology file: GPU %s has no usable UUID (%q)", node.GPUs[i].PCIBusID, u)
		}
		ids = append(ids, u)
	}
	visible := "CUDA_VISIBLE_DEVICES="
	if f.Vendor == inventory.VendorAMD {
		visible = "HIP_VISIBLE_DEVICES="
	}
	return cdispec.Device{
		Name:        ncclDeviceName(claimUID) + scope,
		Annotations: map[string]string{annVendor: string(f.Vendor)},
		ContainerEdits: cdispec.ContainerEdits{
			Env: []string{
				NCCLTopoFileEnv + "=" + nccltopo.ContainerPath,
				visible + strings.Join(ids, ","),
			},
			Mounts: []*cdispec.Mount{{
				HostPath:      w.TopologyPath(claimUID),
				ContainerPath: nccltopo.ContainerPath,
				Options:       ncclTopoMountOptions,
			}},
		},
	}, nil
}

// writeTopology writes the claim's file atomically: a runtime that mounts
// it sees the old file or the new one, never part of one.
func (w *Writer) writeTopology(claimUID string, f *nccltopo.File) error {
	dir := filepath.Join(w.specDir, ncclTopoDirName)
	if err := os.MkdirAll(dir, specDirMode); err != nil {
		return fmt.Errorf("NCCL topology file: %w", err)
	}
	if err := fsutil.WriteFileAtomic(w.TopologyPath(claimUID), f.XML, specFileMode); err != nil {
		return fmt.Errorf("NCCL topology file: %w", err)
	}
	return nil
}

// removeTopology deletes the claim's file; a missing one (a claim that
// never had one, or a removal run again) is not an error.
func (w *Writer) removeTopology(claimUID string) error {
	err := os.Remove(w.TopologyPath(claimUID))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("remove NCCL topology file of claim %s: %w", claimUID, err)
}

// TopologyExists reports whether the claim's topology file is on disk.
func (w *Writer) TopologyExists(claimUID string) bool {
	_, err := os.Stat(w.TopologyPath(claimUID))
	return err == nil
}

// RemoveOrphanTopologyFiles removes, at start, the topology files (and the
// temp files of writes cut short) of claims keep does not name: a crash
// between a plain claim's file and its spec, or between its spec's
// removal and the file's, leaves one no entry owns.
func (w *Writer) RemoveOrphanTopologyFiles(keep func(claimUID string) bool) ([]string, error) {
	dir := filepath.Join(w.specDir, ncclTopoDirName)
	if err := fsutil.RemoveAllTemps(dir, "*"+ncclTopoFileExt); err != nil {
		return nil, fmt.Errorf("NCCL topology files: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("NCCL topology files: %w", err)
	}
	var removed []string
	for _, e := range entries {
		uid, ok := strings.CutSuffix(e.Name(), ncclTopoFileExt)
		if e.IsDir() || !ok || strings.HasPrefix(e.Name(), ".") || keep(uid) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("NCCL topology files: %w", err)
		}
		removed = append(removed, uid)
	}
	return removed, nil
}
