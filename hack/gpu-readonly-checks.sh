#!/usr/bin/env bash
# gpu-readonly-checks.sh: what Tessera's MPS v3 and kernel-limit code assumes
# about a real NVIDIA node, printed for a person to compare with
# docs/sharing.md and docs/nvml.md (what discovery reads: NVLink remote
# types, fabric info, SM count, the NVLink speed field) and docs/rack.md
# (IMEX channels and the daemon's readiness on a GB200/GB300 tray).
# Read-only: it starts no MPS or IMEX daemon, changes no MIG or compute
# mode, creates no channel node, sets no limit. Run it on a GPU machine (no
# argument).
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
