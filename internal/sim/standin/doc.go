// Package standin is a stand-in for NVIDIA's nvidia-cuda-mps-control, for
// the simulator and tests: a real program (`tessera-sim mps-control`) that
// behaves as internal/mps uses the real one, without a GPU.
//
//   - With -f it is the control daemon, in the foreground: it reads
//     CUDA_VISIBLE_DEVICES, makes the control FIFO "control" and the PID file
//     in $CUDA_MPS_PIPE_DIRECTORY, logs every command to control.log in
//     $CUDA_MPS_LOG_DIRECTORY, keeps what it was told in status.json in the
//     pipe directory (ReadStatus: tests and the e2e suite check it there),
//     and exits on quit (or SIGTERM). -p 3 (or CUDA_MPS_PROTOCOL_VERSION=3)
//     runs protocol 3, MPS v3, below; -a FILE names its configuration file.
//   - Without flags it is a client: it sends each line of stdin to the
//     daemon of $CUDA_MPS_PIPE_DIRECTORY, prints the answers, and fails when
//     no daemon runs there or the daemon refuses a command. -q sends quit.
//   - "client [--hold] [--interval=200ms]" is a client session, what a CUDA
//     process of a share is to its MPS server: it connects to the daemon of
//     $CUDA_MPS_PIPE_DIRECTORY (legacy: the pipe directory; v3: a namespace's
//     directory), prints "connected", and with --hold pings every interval
//     until SIGTERM (it disconnects, exit 0) or until no daemon serves the
//     FIFO or the daemon does not know it (namespace deleted, another
//     daemon): then it says why on stderr and exits 3, as a CUDA client of a
//     dead MPS server fails. Without --hold it exits 0 once connected.
//
// Legacy (protocol 2) commands: get_default_active_thread_percentage,
// set_default_active_thread_percentage <1-100>,
// set_default_device_pinned_mem_limit <dev> <n>M|<n>G (dev a UUID of
// CUDA_VISIBLE_DEVICES or an index into it),
// get_default_device_pinned_mem_limit <dev>, get_server_list (always empty:
// no MPS server runs in a simulator) and quit. Unlike the real program it
// refuses what it does not understand, so a typo fails a test.
//
// Protocol 3 models NVIDIA's MPS v3 (driver r615+; docs.nvidia.com/deploy/mps,
// "MPS v3 Interface", "Namespaces", "Configuration File"). The
// configuration file's subset: schema_version = "1.0"; [servers.<s>] with
// allowed_devices (a subset of CUDA_VISIBLE_DEVICES when that is set),
// pinned_memory_limit (<n>M|<n>G), active_thread_percentage ("1"-"100");
// [servers.<s>.namespaces.<ns>] with the last two. Any other key is a
// configuration error naming its path, and the daemon exits 1. Names are
// 1-63 letters, digits, '-', '_', '.', starting with a letter or digit
// (our rule, which keeps "." and ".." out), and not "control"; a created
// namespace is not "default". The sockets, FIFOs of the same wire as the
// legacy one:
//
//	<pipe>/control                 admin: every command below
//	<pipe>/<server>/control        the server's listener, its default namespace
//	<pipe>/<server>/default/control
//	<pipe>/<server>/<ns>/control   a namespace
//
// A server or namespace socket serves only a client's own commands (client
// connect, ping, disconnect) and refuses every other command as not allowed
// on a namespace socket, so a tenant given only its namespace's directory
// cannot quit or reconfigure the daemon. Directories are made 0755, FIFOs
// 0600; namespace delete removes the namespace's directory, and quit or
// SIGTERM removes every FIFO the daemon made (directories stay, for the
// next daemon to serve where containers' mounts point).
//
// Protocol 3 admin commands, in NVIDIA's module-verb form. NVIDIA
// documents that form and `server create --uid=`; the namespace and client
// commands and their flags are modelled, not verified against r615, and
// are spelled in one place (commands.go):
//
//	namespace create --server=S --name=NS [--pinned-memory-limit=<n>M|<n>G] [--active-thread-percentage=1-100]
//	    idempotent with the same settings ("4G" is "4096M"); an error naming both otherwise
//	namespace delete --server=S --name=NS   drops its clients; a missing namespace is no error
//	namespace list --server=S               one per line, sorted, "default" included
//	namespace get --server=S --name=NS      pinned_memory_limit=<v> active_thread_percentage=<v>
//	                                        (unset: 0M, 100; "default": the server's)
//	server list                             one per line, sorted
//	client list --all                       "<pid> <server>/<ns>" per line, by PID ("<pid>" on a legacy daemon)
//	get_server_list, quit                   as in protocol 2
//
// The legacy commands are refused there, saying the daemon runs protocol
// 3. Servers come only from the configuration file (no server create).
//
// Client sessions, our invention (a real MPS server sees its clients'
// CUDA contexts): "client connect|ping|disconnect --pid=N [--pid-ns=INODE]"
// on any socket, in both protocols; a session is its socket's server and
// namespace, the PID and the PID namespace (PIDs in pods repeat). A session
// ends at disconnect or namespace delete, when its PID is gone from the
// daemon's /proc (only when the client's PID namespace is the daemon's),
// or else after PingTimeout without a ping. A ping of an unknown session
// is ErrUnknownClient. Pings are not recorded in status.json's commands
// nor logged, as they would swamp both. Status's Instance and Started tell
// a daemon that kept running from a new one.
//
// The wire: a request is one JSON line written to the control FIFO in one
// write (under PIPE_BUF, so concurrent clients never interleave), naming a
// reply FIFO the client made beside it; the daemon answers there with one
// JSON line.
package standin
