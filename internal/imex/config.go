package imex

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Quorum is IMEX_WAIT_FOR_QUORUM: what the daemon waits for before it is
// ready.
type Quorum string

const (
	// QuorumRecovery waits for peers to reconnect (NVIDIA IMEX guide,
	// "Connections, Quorum, and Clean up").
	QuorumRecovery Quorum = "RECOVERY"
	// QuorumNone is ready at once.
	QuorumNone Quorum = "NONE"
)

// Defaults of the daemon (NVIDIA IMEX guide, config options).
const (
	DefaultConfigFile = "/etc/nvidia-imex/config.cfg"
	DefaultNodesFile  = "/etc/nvidia-imex/nodes_config.cfg"
	DefaultServerPort = 50000
	DefaultCmdPort    = 50005
	DefaultLogLevel   = 4
	// DefaultGraceTime (-1) never gives up on a disconnected peer.
	DefaultGraceTime = -1
)

// The config file's keys.
const (
	keyServerPort = "SERVER_PORT"
	keyNodesFile  = "IMEX_NODE_CONFIG_FILE"
	keyQuorum     = "IMEX_WAIT_FOR_QUORUM"
	keyGraceTime  = "IMEX_NODE_DISCONNECTED_GRACE_TIME"
	keyLogLevel   = "LOG_LEVEL"
	keyCmdSocket  = "IMEX_CMD_UNIX_DOMAIN_PATH"
	keyCmdBindIP  = "IMEX_CMD_BIND_INTERFACE_IP"
	keyCmdPort    = "IMEX_CMD_PORT"
	keyDaemonize  = "DAEMONIZE"
	keyCmdEnabled = "IMEX_CMD_ENABLED"
)

// fixedKeys are keys whose value Tessera does not choose: its daemon runs
// in the foreground of its container (DAEMONIZE=0), and its readiness is
// read through the command service (IMEX_CMD_ENABLED=1). Render writes
// these values; ParseConfig refuses others, so a file it accepts is one
// Tessera could have written.
var fixedKeys = map[string]string{keyDaemonize: "0", keyCmdEnabled: "1"}

// Config is the daemon's config file: the keys Tessera sets, and any
// others in Extra.
type Config struct {
	// ServerPort (SERVER_PORT) is where every peer listens: one port on
	// each node's own address.
	ServerPort int
	// NodesFile (IMEX_NODE_CONFIG_FILE) is the nodes file's path.
	NodesFile string
	// WaitForQuorum (IMEX_WAIT_FOR_QUORUM).
	WaitForQuorum Quorum
	// GraceTime (IMEX_NODE_DISCONNECTED_GRACE_TIME) is how long a lost
	// peer's imports are kept before clean-up; -1 waits for it forever.
	GraceTime int
	// LogLevel (LOG_LEVEL).
	LogLevel int
	// CmdUnixSocket (IMEX_CMD_UNIX_DOMAIN_PATH) is the command service's
	// unix socket, "" for none: a path needs no port, which keeps the
	// node's host network free of one more listener.
	CmdUnixSocket string
	// CmdBindIP (IMEX_CMD_BIND_INTERFACE_IP) and CmdPort (IMEX_CMD_PORT)
	// are the command service's TCP address; "" binds the daemon's
	// default interface.
	CmdBindIP string
	CmdPort   int
	// Extra are keys Tessera does not set, as read: kept, so that a file
	// read and rendered again loses none of a site's settings. A known key
	// here is not rendered.
	Extra map[string]string
}

// DefaultConfig is the daemon's defaults, with RECOVERY as Tessera's
// choice of quorum.
func DefaultConfig() Config {
	return Config{
		ServerPort: DefaultServerPort, NodesFile: DefaultNodesFile, WaitForQuorum: QuorumRecovery,
		GraceTime: DefaultGraceTime, LogLevel: DefaultLogLevel, CmdPort: DefaultCmdPort,
	}
}

var keyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks every field as the daemon would need it.
func (c Config) Validate() error {
	for _, p := range []struct {
		key  string
		port int
	}{{keyServerPort, c.ServerPort}, {keyCmdPort, c.CmdPort}} {
		if p.port < 1 || p.port > 65535 {
			return fmt.Errorf("%s %d is not a TCP port (1-65535)", p.key, p.port)
		}
	}
	switch {
	case c.NodesFile == "" || !filepath.IsAbs(c.NodesFile):
		return fmt.Errorf("%s %q is not an absolute path", keyNodesFile, c.NodesFile)
	case c.WaitForQuorum != QuorumRecovery && c.WaitForQuorum != QuorumNone:
		return fmt.Errorf("%s %q is not %s or %s", keyQuorum, c.WaitForQuorum, QuorumRecovery, QuorumNone)
	case c.GraceTime < -1:
		return fmt.Errorf("%s %d is neither -1 (wait forever) nor a time", keyGraceTime, c.GraceTime)
	case c.LogLevel < 0:
		return fmt.Errorf("%s %d is negative", keyLogLevel, c.LogLevel)
	case c.CmdUnixSocket != "" && !filepath.IsAbs(c.CmdUnixSocket):
		return fmt.Errorf("%s %q is not an absolute path", keyCmdSocket, c.CmdUnixSocket)
	}
	if c.CmdBindIP != "" {
		if _, err := netip.ParseAddr(c.CmdBindIP); err != nil {
			return fmt.Errorf("%s %q is not an IP address", keyCmdBindIP, c.CmdBindIP)
		}
	}
	for k, v := range c.Extra {
		if !keyPattern.MatchString(k) || strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("extra setting %q=%q is not a KEY=VALUE line", k, v)
		}
	}
	return nil
}

// Render is the config file: Tessera's keys in a fixed order, then Extra's
// sorted by key, each KEY=VALUE on its own line. Only a valid Config
// (Validate) renders a file the daemon accepts.
func (c Config) Render() []byte {
	var b bytes.Buffer
	b.WriteString("# nvidia-imex configuration, written by Tessera.\n")
	line := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, v) }
	line(keyServerPort, strconv.Itoa(c.ServerPort))
	line(keyNodesFile, c.NodesFile)
	line(keyQuorum, string(c.WaitForQuorum))
	line(keyGraceTime, strconv.Itoa(c.GraceTime))
	line(keyLogLevel, strconv.Itoa(c.LogLevel))
	line(keyDaemonize, fixedKeys[keyDaemonize])
	line(keyCmdEnabled, fixedKeys[keyCmdEnabled])
	line(keyCmdPort, strconv.Itoa(c.CmdPort))
	// An empty value would be a setting of its own to the daemon: leave
	// the key out for its default.
	if c.CmdBindIP != "" {
		line(keyCmdBindIP, c.CmdBindIP)
	}
	if c.CmdUnixSocket != "" {
		line(keyCmdSocket, c.CmdUnixSocket)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Extra)) {
		if _, known := setters[k]; !known && fixedKeys[k] == "" {
			line(k, c.Extra[k])
		}
	}
	return b.Bytes()
}

// setters store a known key's value in a Config.
var setters = map[string]func(*Config, string) error{
	keyServerPort: func(c *Config, v string) error { return atoi(v, &c.ServerPort) },
	keyNodesFile:  func(c *Config, v string) error { c.NodesFile = v; return nil },
	keyQuorum:     func(c *Config, v string) error { c.WaitForQuorum = Quorum(v); return nil },
	keyGraceTime:  func(c *Config, v string) error { return atoi(v, &c.GraceTime) },
	keyLogLevel:   func(c *Config, v string) error { return atoi(v, &c.LogLevel) },
	keyCmdSocket:  func(c *Config, v string) error { c.CmdUnixSocket = v; return nil },
	keyCmdBindIP:  func(c *Config, v string) error { c.CmdBindIP = v; return nil },
	keyCmdPort:    func(c *Config, v string) error { return atoi(v, &c.CmdPort) },
}

func atoi(v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not an integer", v)
	}
	*dst = n
	return nil
}

// ParseConfig reads a config file: KEY=VALUE lines (spaces around either
// trimmed), blank lines and lines starting with '#' skipped; a key not
// given keeps DefaultConfig's value; keys Tessera does not set are kept in
// Extra. A line that is not KEY=VALUE, a key given twice, a value of the
// wrong kind, DAEMONIZE other than 0 or IMEX_CMD_ENABLED other than 1 is
// an error naming the line.
func ParseConfig(data []byte) (Config, error) {
	c := DefaultConfig()
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !keyPattern.MatchString(k) {
			return Config{}, fmt.Errorf("line %d %q: not a KEY=VALUE setting", n, text)
		}
		if first, dup := seen[k]; dup {
			return Config{}, fmt.Errorf("line %d: %s set again (first on line %d)", n, k, first)
		}
		seen[k] = n
		if err := set(&c, k, v); err != nil {
			return Config{}, fmt.Errorf("line %d: %s: %w", n, k, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		// Validate's errors start with the key; a default is never invalid.
		if n, ok := seen[invalidKey(err)]; ok {
			return Config{}, fmt.Errorf("line %d: %w", n, err)
		}
		return Config{}, err
	}
	return c, nil
}

// set stores one setting read from a file.
func set(c *Config, k, v string) error {
	if want, fixed := fixedKeys[k]; fixed {
		if v != want {
			return fmt.Errorf("%q: Tessera runs the daemon only with %s=%s", v, k, want)
		}
		return nil
	}
	if s, known := setters[k]; known {
		return s(c, v)
	}
	if c.Extra == nil {
		c.Extra = map[string]string{}
	}
	c.Extra[k] = v
	return nil
}

// invalidKey is the key a Validate error starts with, for its line.
func invalidKey(err error) string {
	k, _, _ := strings.Cut(err.Error(), " ")
	return k
}
