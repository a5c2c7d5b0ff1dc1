// Package imex holds the node-level pieces of NVIDIA IMEX that Tessera
// needs: the daemon's configuration and nodes files, its readiness query,
// and the IMEX channel devices a job's containers are given.
//
// What IMEX is. A GB200/GB300 NVL72 rack joins the GPUs of up to 18
// compute trays (nodes of 4 GPUs) into one multi-node NVLink domain. IMEX
// (the nvidia-imex daemon, one per node) lets a process on one node import
// GPU memory exported by a process on another node of the domain. The
// daemons of a domain are peers: each connects to every other one.
//
// The rules this package follows (NVIDIA IMEX guide):
//
//   - The daemon reads KEY=VALUE lines from its config file
//     (/etc/nvidia-imex/config.cfg), '#' starting a comment line. The keys
//     Tessera uses and their defaults: SERVER_PORT=50000 (where peers
//     connect), IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg,
//     IMEX_WAIT_FOR_QUORUM=RECOVERY|NONE, IMEX_ENABLE_AUTH_ENCRYPTION=0,
//     IMEX_CMD_ENABLED=1, IMEX_CMD_BIND_INTERFACE_IP, IMEX_CMD_PORT=50005,
//     IMEX_CMD_UNIX_DOMAIN_PATH, IMEX_NODE_DISCONNECTED_GRACE_TIME=-1,
//     DAEMONIZE=0, LOG_LEVEL=4 (config.go).
//   - The nodes file lists every IMEX peer of the domain, the node itself
//     included, one IP address or DNS name a line. It must be complete
//     before the daemon starts, which reads it only then; daemons whose
//     lists differ fail to initialize with each other (config.go).
//   - `nvidia-imex-ctl -c <config> -q` prints READY once the daemon is
//     ready; anything else means not ready (ctl.go).
//
// Channels (open-gpu-kernel-modules). A process may import memory only
// through an IMEX channel device it can open, so a channel is the
// isolation boundary between jobs. The kernel module registers a char
// device region named nvidia-caps-imex-channels (in /proc/devices) with
// NVreg_ImexChannelCount minors (default 2048; 0 disables IMEX); minor N is
// channel N. The driver makes no /dev nodes for them (channel 0 only with
// NVreg_CreateImexChannel0=1): whoever hands out a channel creates
// /dev/nvidia-caps-imex-channels/channelN itself (channels.go).
//
// How Tessera uses IMEX: one long-lived daemon per node for the whole
// domain (its peers never change while the rack's membership does not),
// and one channel per job (pod group), given to each of the job's
// containers as a CDI device node, which the container runtime creates
// inside that container only. Publishing channels, preparing them for
// claims and running the daemons live elsewhere; this package only
// parses and renders.
package imex
