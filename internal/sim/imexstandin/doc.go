// Package imexstandin is a stand-in for NVIDIA's IMEX daemon (nvidia-imex)
// and its control program (nvidia-imex-ctl), for the simulator and tests:
// real programs that behave as Tessera uses the real ones, without a
// multi-node NVLink domain. internal/imex has the rules they follow.
//
//   - `tessera-sim imex -c <config> [--address=A]`, or the binary run as
//     nvidia-imex, is the daemon, in the foreground. It reads its config
//     file (imex.ParseConfig) and the nodes file that names
//     (imex.ParseNodesFile). Its own address is --address, which must be a
//     line of the nodes file, or else the first line of the nodes file it
//     can listen on: the local cluster gives each simulated tray its own
//     loopback address 127.0.0.x, all with the same SERVER_PORT, as real
//     trays share one port on different IPs. It listens on
//     <own address>:SERVER_PORT and connects to every other peer, retrying
//     with backoff until stopped (a peer that connects to it is retried at
//     once: it has just come up). On SIGTERM it closes every connection
//     and its socket and exits 0.
//   - `tessera-sim imex-ctl -c <config> -q`, or the binary run as
//     nvidia-imex-ctl, prints the daemon's status line: READY, or
//     NOT_READY and why, e.g. `NOT_READY: waiting for 10.0.0.3 (3 of 4
//     peers connected)` (peers count the node itself, as the nodes file
//     lists it). It exits 0 when a daemon answered, 1 when none did.
//
// Readiness. The daemon is READY when it holds a connection to every
// other peer, and NOT_READY while any is missing or lost: the stand-in's
// reading of IMEX_WAIT_FOR_QUORUM=RECOVERY, which is stricter than the
// real daemon (NVIDIA IMEX guide, "Connections, Quorum, and Clean up":
// it waits for peers only when recovering from an unclean shutdown), so
// that tests see a lost tray. With NONE it is READY at once, connecting
// all the same. IMEX_NODE_DISCONNECTED_GRACE_TIME is read and not
// modelled: no memory is ever imported.
//
// The peers' wire, our invention: a daemon opens one TCP connection to
// each other peer and sends one line, "TESSERA-IMEX-SIM/1 HELLO <its
// address> <hash of its nodes list>". The peer answers "TESSERA-IMEX-SIM/1
// OK <its address>" and both keep the connection open, sending nothing
// more, until one closes it: that is the link, and its end is a lost
// peer. A peer whose nodes list differs (other peers, or the same in
// another order) is answered "TESSERA-IMEX-SIM/1 REFUSED <why>" and
// logged on both sides, as real daemons with different lists fail to
// initialize with each other; the status names it.
//
// The command service is IMEX_CMD_UNIX_DOMAIN_PATH only, which the
// stand-in requires: the real daemon also serves TCP (IMEX_CMD_PORT), but
// simulated trays on one machine find their own daemon by a path each
// more simply than by a port each. A client connects and reads one line,
// the status; it sends nothing.
//
// Faults. A file named imex-fault beside the config file (FaultFile)
// makes the daemon report `NOT_READY: injected fault[: <the file's
// text>]`, drop every peer connection, refuse peers that connect and stop
// connecting, until the file is gone; it checks every FaultPoll. The file
// sits beside the config, not in a node's simulator state, because a
// daemon run as nvidia-imex knows no more than its config's path, as the
// real one. `tessera-sim inject --imex-config=<config> --imex-fail` and
// `--imex-clear` write and remove it (InjectFault, ClearFault).
package imexstandin
