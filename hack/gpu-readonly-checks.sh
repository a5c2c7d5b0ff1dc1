#!/usr/bin/env bash
# gpu-readonly-checks.sh: what Tessera's MPS v3 and kernel-limit code assumes
# about a real NVIDIA node, printed for a person to compare with
# docs/sharing.md and docs/nvml.md (what discovery reads: NVLink remote
# types, fabric info, SM count, the NVLink speed field) and docs/rack.md
# (IMEX channels and the daemon's readiness on a GB200/GB300 tray), and
# docs/vfio.md (IOMMU groups, the driver and driver_override of each GPU and
# of every device sharing its group, vfio-pci loaded, who holds each GPU's
# nodes: what passthrough would meet). Read-only: it starts no MPS or IMEX
# daemon, changes no MIG or compute mode, creates no channel node, sets no
# limit, and writes nothing under /sys (no driver_override, bind, unbind or
# drivers_probe). Run it on a GPU machine (no argument).
set -u

section() { printf '\n== %s\n' "$1"; }
run() { printf '$ %s\n' "$*"; "$@" 2>&1 | head -n 60; printf '(exit %s)\n' "${PIPESTATUS[0]}"; }

section "driver, MIG mode, compute mode (MPS v3 needs r615+; namespaces per share)"
run nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,mig.mode.current,compute_mode --format=csv

# AMD hosts (KFD's topology, partition modes, links): its own script, which
# says so and returns where there is no KFD topology (an NVIDIA-only host).
bash "$(dirname "$0")/amd-readonly-checks.sh"

section "cgroup v2 and the dmem controller (kernel memory limits)"
run stat -fc %T /sys/fs/cgroup
run cat /sys/fs/cgroup/cgroup.controllers
run cat /sys/fs/cgroup/dmem.capacity

section "MPS v3: the control program's own help (no daemon is started)"
run nvidia-cuda-mps-control -h
run nvidia-cuda-mps-control -p 3 -h

section "a running MPS daemon, if any (nothing is sent to it)"
run pgrep -a nvidia-cuda-mps

section "discovery's NVML answers (docs/nvml.md): remote device type per link, fabric info, SM count, NVLink speed field"
run nvidia-smi nvlink -R
run nvidia-smi nvlink -s
run sh -c "nvidia-smi -q | grep -A 8 -i '^ *Fabric'"
# The exact calls the nvml backend makes, read-only (needs Go and cgo).
run go run ./hack/nvml-answers

section "the PCIe bridges above each GPU (NCCL topology file, docs/training.md) and nvidia-smi's view of them"
for bdf in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null | tr 'A-F' 'a-f' | sed 's/^0000//'); do
  run readlink -f "/sys/bus/pci/devices/$bdf"
done
run nvidia-smi topo -m

section "IMEX on a multi-node NVLink tray (docs/rack.md): the channel region, the channel count, the daemon's answer"
run sh -c "grep -A 200 '^Character devices:' /proc/devices | grep nvidia-caps-imex-channels"
run sh -c "grep -i imex /proc/driver/nvidia/params"
run ls -l /dev/nvidia-caps-imex-channels
run systemctl is-active nvidia-imex
run nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg -q
run nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg -N
run sh -c "grep -v '^#' /etc/nvidia-imex/config.cfg | grep ."
run cat /etc/nvidia-imex/nodes_config.cfg

section "passthrough (docs/vfio.md): IOMMU on, vfio-pci loaded, the kernel command line"
run sh -c "ls /sys/kernel/iommu_groups | wc -l"
run ls -d /sys/bus/pci/drivers/vfio-pci /sys/module/vfio_pci /sys/module/vfio
run ls -l /dev/vfio
run cat /proc/cmdline
run sh -c "dmesg 2>/dev/null | grep -iE 'DMAR|AMD-Vi|IOMMU' | head -n 20"

section "each GPU (PCI class 03xx of NVIDIA 10de or AMD 1002): driver, driver_override, IOMMU group and every device sharing it"
for dev in /sys/bus/pci/devices/*; do
  class=$(cat "$dev/class" 2>/dev/null); vendor=$(cat "$dev/vendor" 2>/dev/null)
  case "$class:$vendor" in
    0x03*:0x10de|0x03*:0x1002) ;;
    *) continue ;;
  esac
  bdf=$(basename "$dev")
  printf '\n-- %s (vendor %s, class %s)\n' "$bdf" "$vendor" "$class"
  run readlink "$dev/driver"
  run cat "$dev/driver_override"
  run readlink "$dev/iommu_group"
  if [ -d "$dev/iommu_group/devices" ]; then
    for member in "$dev"/iommu_group/devices/*; do
      m=$(basename "$member")
      printf '   member %s class %s driver %s\n' "$m" "$(cat "$member/class" 2>/dev/null)" "$(basename "$(readlink "$member/driver" 2>/dev/null)" 2>/dev/null)"
    done
  fi
done

section "who holds each GPU's nodes (an unbind of nvidia waits for them): persistence daemon, monitors"
run sh -c "ls -l /proc/[0-9]*/fd 2>/dev/null | grep -E '/dev/(nvidia[0-9]+|dri/renderD[0-9]+|kfd)' | sort | uniq -c | head -n 40"
run pgrep -af nvidia-persistenced
run nvidia-smi --query-gpu=index,pci.bus_id,persistence_mode,display_active --format=csv

