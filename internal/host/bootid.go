// Package host reads facts about the machine the agent runs on.
package host

import (
	"fmt"
	"os"
	"strings"
)

// bootIDPath is a variable so tests can point it elsewhere.
var bootIDPath = "/proc/sys/kernel/random/boot_id"

// BootID returns the kernel's boot ID, which changes at every boot. The
// agent stores it in the checkpoint, and the simulator in its state, to
// notice reboots: carved partitions and device state do not survive one.
func BootID() (string, error) {
	data, err := os.ReadFile(bootIDPath)
	if err != nil {
		return "", fmt.Errorf("read boot ID: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", fmt.Errorf("read boot ID: %s is empty", bootIDPath)
	}
	return id, nil
}
