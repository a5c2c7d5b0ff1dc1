package imex

import "strings"

// ReadyStatus is what `nvidia-imex-ctl -q` prints for a ready daemon
// (NVIDIA IMEX guide, command service).
const ReadyStatus = "READY"

// ParseQuery reads the output of `nvidia-imex-ctl -c <config> -q`: ready
// only when it is READY alone (spaces around it aside); otherwise not
// ready, with the trimmed output as the status to report.
func ParseQuery(out []byte) (ready bool, status string) {
	status = strings.TrimSpace(string(out))
	return status == ReadyStatus, status
}
