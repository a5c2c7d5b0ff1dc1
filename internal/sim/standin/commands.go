package standin

import (
	"fmt"
	"slices"
	"strings"
)

// The v3 command line: "<module> <verb> --flag=value ...". NVIDIA documents
// the module-verb form and `server create --uid=`; the namespace and client
// flags below are this stand-in's choice, kept here in one place.
const (
	moduleNamespace = "namespace"
	moduleServer    = "server"
	moduleClient    = "client"

	flagServer                 = "server"
	flagName                   = "name"
	flagPinnedMemoryLimit      = "pinned-memory-limit"
	flagActiveThreadPercentage = "active-thread-percentage"
	flagAll                    = "all"
	// flagPID is the client's PID as it sees it; flagPIDNamespace the
	// inode of its PID namespace, by which the daemon knows whether that
	// PID is one it can look up in its own /proc.
	flagPID          = "pid"
	flagPIDNamespace = "pid-ns"
)

// legacyCommands are the protocol 2 commands a v3 daemon refuses; quit and
// get_server_list it serves in both.
var legacyCommands = []string{
	"get_default_active_thread_percentage", "set_default_active_thread_percentage",
	"set_default_device_pinned_mem_limit", "get_default_device_pinned_mem_limit",
}

// flags are a command's --name=value arguments ("--all": value "").
type flags map[string]string

// parseFlags reads args as flags of command, each one of allowed, once.
func parseFlags(command string, args []string, allowed ...string) (flags, error) {
	fl := flags{}
	for _, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("%s: unknown argument %q (flags: --%s)", command, a, strings.Join(allowed, ", --"))
		}
		if _, dup := fl[name]; dup {
			return nil, fmt.Errorf("%s: --%s given twice", command, name)
		}
		if hasValue && value == "" {
			return nil, fmt.Errorf("%s: --%s is empty", command, name)
		}
		fl[name] = value
	}
	return fl, nil
}

// need checks that every one of names was given with a value.
func (fl flags) need(command string, names ...string) error {
	for _, n := range names {
		if fl[n] == "" {
			return fmt.Errorf("%s: --%s=<value> is required", command, n)
		}
	}
	return nil
}
