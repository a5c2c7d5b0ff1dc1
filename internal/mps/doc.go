// Package mps runs NVIDIA MPS control daemons, one per claim, for the
// backends that implement backend.Sharer (nvml with NVIDIA's
// nvidia-cuda-mps-control, sim with the stand-in of internal/sim/standin). It
// knows the control program's protocol and the processes, not the GPUs:
// which devices a claim may use is the backend's to check.
//
// # Layout
//
// Each daemon has a directory <Root>/<id>: pipe/ (CUDA_MPS_PIPE_DIRECTORY,
// which the claim's containers mount), log/ (CUDA_MPS_LOG_DIRECTORY, plus
// daemon.out, the daemon's stdout and stderr) and record.json, the record:
// devices, boot id, PID and process start time.
//
// # Protocol
//
// The daemon is the control program run in the foreground (-f) with
// CUDA_VISIBLE_DEVICES set to the claim's UUIDs. Settings and shutdown are
// sent by running the same program without flags, with the same pipe
// directory, and one command on stdin: a query
// (get_default_active_thread_percentage) until the daemon answers, which is
// how Start knows it accepts clients, then set_default_active_thread_percentage
// and set_default_device_pinned_mem_limit <uuid> <n>M, and quit to stop it.
//
// # Why detached
//
// Running workloads talk to the daemon through its pipes: if it dies, their
// CUDA calls fail. So it must not share the agent's fate: it is started in a
// session of its own (setsid), with stdin from /dev/null and its output in
// its log directory, never tied to a context. When the agent runs as a host
// process and restarts, the daemon keeps running, reparented to init, and
// the next agent adopts it (Start with the same id and devices) instead of
// starting a second one under workloads that use the first.
//
// A child process cannot outlive a container: its PID namespace and cgroup
// go with the agent's. What runs the daemon is therefore a Launcher: the
// ProcessLauncher above for agents on the host (systemd, the local
// cluster's fake runtime), internal/mps/daemonpod's pods of the node for agents
// that run as the chart's pod. The Manager records the launcher's Handle
// (a PID and start time, or a pod and its UID) and asks the launcher
// whether it is alive, to kill it, and to find daemons whose handle a
// crash lost.
//
// # Crash safety
//
// Start writes the record (atomically) before it launches, then adds the
// handle. A crash in between leaves a daemon whose handle nobody wrote
// down, so every daemon also carries TESSERA_MPS_DAEMON=<id> in its
// environment and the launcher finds it: by scanning /proc/*/environ, or by
// its pod's labels. A PID alone could name another
// process after the daemon died (PID reuse), so liveness is kill(pid, 0)
// plus the process start time (field 22 of /proc/<pid>/stat) and the boot
// id the record was written under. Start and Stop are idempotent: Start
// adopts a live daemon with the same devices and replaces a dead or
// different one; Stop of a daemon that does not exist is not an error.
package mps
