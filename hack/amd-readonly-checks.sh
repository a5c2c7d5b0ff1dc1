#!/usr/bin/env bash
# amd-readonly-checks.sh: what Tessera's amd backend (internal/backend/amdsysfs)
# reads on a real AMD node, printed for a person to compare with
# docs/operating.md ("AMD discovery") and the real KFD captures in
# test/fixtures/amd, which lack what this prints: each GPU's mem_banks (the
# MI300X and MI210 captures), the KFD names, the PCI device directories with
# the partition files, and the DRM links that give a GPU's PCI domain.
# Read-only: it writes nothing under /sys (never current_compute_partition or
# current_memory_partition), changes no partition mode, loads or reloads no
# module. gpu-readonly-checks.sh runs it; on a host without KFD's topology
# (NVIDIA only) it says so and exits 0. An argument names a sysfs root to
# read instead of / (a fixture tree, to try the script without AMD GPUs).
set -u

root="${1:-}"
topo=$root/sys/class/kfd/kfd/topology

section() { printf '\n== %s\n' "$1"; }
run() { printf '$ %s\n' "$*"; "$@" 2>&1 | head -n 60; printf '(exit %s)\n' "${PIPESTATUS[0]}"; }

if [ ! -d "$topo/nodes" ]; then
  printf '\n== AMD: no KFD topology at %s (amdgpu not loaded, or not an AMD GPU host): AMD checks skipped\n' "$topo"
  exit 0
fi

section "AMD: KFD topology (generation, system properties, node count)"
run cat "$topo/generation_id" "$topo/system_properties"
run sh -c "ls $topo/nodes | wc -l"

section "AMD: each KFD node: gpu_id, name, the properties discovery reads, VRAM banks (memory unknown without a heap_type 1 or 2 bank)"
for node in "$topo"/nodes/*; do
  printf -- '-- %s\n' "$node"
  run cat "$node/gpu_id" "$node/name"
  run grep -E '^(cpu_cores_count|simd_count|simd_per_cu|num_xcc|gfx_target_version|vendor_id|device_id|location_id|domain|drm_render_minor|hive_id|local_mem_size|unique_id|mem_banks_count|io_links_count|p2p_links_count) ' "$node/properties"
  run sh -c "ls -d $node/mem_banks/* 2>&1; for b in $node/mem_banks/*/properties; do echo \"\$b:\"; cat \"\$b\"; done"
done

section "AMD: each KFD node's links, counted by type (2 PCIe, 11 xGMI), weight and max_bandwidth (MB/s; 0 on a link is what fabricBandwidthGBps leaves out)"
for node in "$topo"/nodes/*; do
  for kind in io_links p2p_links; do
    [ -d "$node/$kind" ] || continue
    printf -- '-- %s/%s\n' "$node" "$kind"
    for l in "$node/$kind"/*/properties; do
      awk '/^(type|weight|max_bandwidth) /{printf "%s=%s ", $1, $2} END{print ""}' "$l"
    done | sort | uniq -c
  done
done

section "AMD: each amdgpu PCI device: IDs, NUMA node, partition modes (current/available compute and memory), DRM nodes"
for dev in "$root"/sys/bus/pci/drivers/amdgpu/[0-9a-f]*:* "$root"/sys/bus/pci/devices/*; do
  # amdgpu's own list on a host; a fixture tree has only devices/ (AMD's 0x1002).
  [ -e "$dev" ] || continue
  case "$dev" in */devices/*) [ "$(cat "$dev/vendor" 2>/dev/null)" = 0x1002 ] && [ ! -d "$root/sys/bus/pci/drivers/amdgpu" ] || continue ;; esac
  run readlink -f "$dev"
  for f in vendor device numa_node current_compute_partition available_compute_partition current_memory_partition available_memory_partition; do
    run cat "$dev/$f"
  done
  run ls "$dev/drm"
done

section "AMD: what each render node links to (the PCI device, domain included, or an amdgpu_xcp platform device for a partition)"
for r in "$root"/sys/class/drm/renderD*; do
  [ -e "$r" ] && printf '%s -> %s\n' "$r" "$(readlink -f "$r")"
done
run sh -c "ls -d $root/sys/devices/platform/amdgpu_xcp* 2>&1 | head -n 80"
run cat "$root/sys/module/amdgpu/version"

section "AMD: amd-smi's view, read-only subcommands (if installed)"
if command -v amd-smi >/dev/null 2>&1; then
  run amd-smi version
  run amd-smi list
  run amd-smi static --asic --bus --vram
  run amd-smi partition
else
  echo "amd-smi not installed"
fi

section "AMD: what Tessera would publish here (no cluster: --dry-run prints the ResourceSlices and exits)"
# Whole, not cut at 60 lines like the rest: the devices are the point.
printf '$ go run ./cmd/tessera-kubelet-plugin --backend=amd --sysfs-root=%s --dry-run\n' "${root:-/}"
go run ./cmd/tessera-kubelet-plugin --backend=amd --sysfs-root="${root:-/}" --node-name="$(hostname)" --dry-run 2>&1
printf '(exit %s)\n' "$?"
