// Package standin is a stand-in for NVIDIA's nvidia-cuda-mps-control, for
// the simulator and tests: a real program (`tessera-sim mps-control`) that
// behaves as pkg/mps uses the real one, without a GPU.
//
//   - With -f it is the control daemon, in the foreground: it reads
//     CUDA_VISIBLE_DEVICES, makes the control FIFO "control" and the PID file
//     in $CUDA_MPS_PIPE_DIRECTORY, logs every command to control.log in
//     $CUDA_MPS_LOG_DIRECTORY, keeps what it was told in status.json in the
//     pipe directory (ReadStatus: tests and the e2e suite check it there),
//     and exits on quit (or SIGTERM).
//   - Without flags it is a client: it sends each line of stdin to the
//     daemon of $CUDA_MPS_PIPE_DIRECTORY, prints the answers, and fails when
//     no daemon runs there or the daemon refuses a command.
//
// Commands: get_default_active_thread_percentage,
// set_default_active_thread_percentage <1-100>,
// set_default_device_pinned_mem_limit <dev> <n>M|<n>G (dev a UUID of
// CUDA_VISIBLE_DEVICES or an index into it),
// get_default_device_pinned_mem_limit <dev>, get_server_list (always empty:
// no MPS server runs in a simulator) and quit. Unlike the real program it
// refuses what it does not understand, so a typo fails a test.
//
// The wire: a request is one JSON line written to the control FIFO in one
// write (under PIPE_BUF, so concurrent clients never interleave), naming a
// reply FIFO the client made; the daemon answers there with one JSON line.
package standin
