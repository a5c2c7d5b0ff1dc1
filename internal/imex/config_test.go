package imex

import (
	"reflect"
	"strings"
	"testing"
)

// TestConfigRoundTrip: what Render writes, ParseConfig reads back the same,
// with the fixed keys as Tessera runs the daemon.
func TestConfigRoundTrip(t *testing.T) {
	c := DefaultConfig()
	c.ServerPort = 50100
	c.NodesFile = "/etc/nvidia-imex/domain-a/nodes_config.cfg"
	c.WaitForQuorum = QuorumNone
	c.GraceTime = 30
	c.LogLevel = 2
	c.CmdUnixSocket = "/run/nvidia-imex/domain-a.sock"
	c.CmdBindIP = "10.0.0.1"
	c.Extra = map[string]string{"IMEX_ENABLE_AUTH_ENCRYPTION": "0", "IMEX_LOG_FILE": "/var/log/nvidia-imex.log"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	data := c.Render()
	want := `# nvidia-imex configuration, written by Tessera.
SERVER_PORT=50100
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/domain-a/nodes_config.cfg
IMEX_WAIT_FOR_QUORUM=NONE
IMEX_NODE_DISCONNECTED_GRACE_TIME=30
LOG_LEVEL=2
DAEMONIZE=0
IMEX_CMD_ENABLED=1
IMEX_CMD_PORT=50005
IMEX_CMD_BIND_INTERFACE_IP=10.0.0.1
IMEX_CMD_UNIX_DOMAIN_PATH=/run/nvidia-imex/domain-a.sock
IMEX_ENABLE_AUTH_ENCRYPTION=0
IMEX_LOG_FILE=/var/log/nvidia-imex.log
`
	if string(data) != want {
		t.Errorf("Render:\n%s\nwant\n%s", data, want)
	}
	got, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("ParseConfig(Render()) = %+v, want %+v", got, c)
	}
}

// TestRenderDefaults: the defaults render the daemon's defaults, without
// the empty keys, and an extra setting cannot override a key Tessera sets.
func TestRenderDefaults(t *testing.T) {
	c := DefaultConfig()
	c.Extra = map[string]string{"DAEMONIZE": "1", "SERVER_PORT": "1"}
	got := string(c.Render())
	for _, line := range []string{"SERVER_PORT=50000\n", "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n",
		"IMEX_WAIT_FOR_QUORUM=RECOVERY\n", "IMEX_NODE_DISCONNECTED_GRACE_TIME=-1\n", "LOG_LEVEL=4\n", "DAEMONIZE=0\n", "IMEX_CMD_ENABLED=1\n", "IMEX_CMD_PORT=50005\n"} {
		if strings.Count(got, line) != 1 {
			t.Errorf("Render lacks %q once:\n%s", line, got)
		}
	}
	if strings.Contains(got, "DAEMONIZE=1") || strings.Contains(got, "SERVER_PORT=1\n") || strings.Contains(got, "IMEX_CMD_UNIX") || strings.Contains(got, "BIND_INTERFACE") {
		t.Errorf("Render:\n%s", got)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		check   func(Config) bool
		wantErr string
	}{
		{name: "empty is the defaults", in: "", check: func(c Config) bool { return reflect.DeepEqual(c, DefaultConfig()) }},
		{name: "comments, blank lines, spaces, an empty value", in: "# IMEX config\n\nSERVER_PORT=50000\nIMEX_WAIT_FOR_QUORUM=RECOVERY\n  LOG_LEVEL = 3 \nIMEX_CMD_BIND_INTERFACE_IP=\n",
			check: func(c Config) bool { return c.LogLevel == 3 && c.CmdBindIP == "" && c.Extra == nil }},
		{name: "unknown keys kept", in: "IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_CHANNELS=x\n",
			check: func(c Config) bool {
				return c.Extra["IMEX_ENABLE_AUTH_ENCRYPTION"] == "1" && c.Extra["IMEX_CHANNELS"] == "x"
			}},
		{name: "no equals sign", in: "SERVER_PORT=1\nLOG_LEVEL 4\n", wantErr: `line 2 "LOG_LEVEL 4": not a KEY=VALUE setting`},
		{name: "no key", in: "=4\n", wantErr: "line 1"},
		{name: "key with a space", in: "\nLOG LEVEL=4\n", wantErr: "line 2"},
		{name: "given twice", in: "LOG_LEVEL=4\n#\nLOG_LEVEL=3\n", wantErr: "line 3: LOG_LEVEL set again (first on line 1)"},
		{name: "port not a number", in: "SERVER_PORT=fifty\n", wantErr: `line 1: SERVER_PORT: "fifty" is not an integer`},
		{name: "port out of range", in: "LOG_LEVEL=4\nSERVER_PORT=70000\n", wantErr: "line 2: SERVER_PORT 70000 is not a TCP port"},
		{name: "quorum", in: "IMEX_WAIT_FOR_QUORUM=ALL\n", wantErr: `line 1: IMEX_WAIT_FOR_QUORUM "ALL" is not RECOVERY or NONE`},
		{name: "grace time", in: "IMEX_NODE_DISCONNECTED_GRACE_TIME=-2\n", wantErr: "line 1: IMEX_NODE_DISCONNECTED_GRACE_TIME -2"},
		{name: "relative nodes file", in: "IMEX_NODE_CONFIG_FILE=nodes.cfg\n", wantErr: "line 1: IMEX_NODE_CONFIG_FILE"},
		{name: "relative socket", in: "IMEX_CMD_UNIX_DOMAIN_PATH=imex.sock\n", wantErr: "line 1: IMEX_CMD_UNIX_DOMAIN_PATH"},
		{name: "bind IP", in: "\n\nIMEX_CMD_BIND_INTERFACE_IP=eth0\n", wantErr: "line 3: IMEX_CMD_BIND_INTERFACE_IP"},
		{name: "daemonized", in: "DAEMONIZE=1\n", wantErr: `line 1: DAEMONIZE: "1": Tessera runs the daemon only with DAEMONIZE=0`},
		{name: "command service off", in: "IMEX_CMD_ENABLED=0\n", wantErr: "line 1: IMEX_CMD_ENABLED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil || !tt.check(got) {
					t.Fatalf("ParseConfig = %+v, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseConfig = %+v, %v; want an error with %q", got, err, tt.wantErr)
			}
		})
	}
}

func TestValidateExtra(t *testing.T) {
	c := DefaultConfig()
	c.Extra = map[string]string{"A": "x\nSERVER_PORT=1"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "not a KEY=VALUE line") {
		t.Errorf("Validate: %v", err)
	}
}
