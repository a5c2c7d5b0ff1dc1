package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{name: "no subcommand", status: 2, stderr: "mps-control"},
		{name: "help", args: []string{"help"}, status: 0, stderr: "usage: tessera-sim"},
		{name: "unknown subcommand", args: []string{"fly"}, status: 2, stderr: `unknown subcommand "fly"`},
		{name: "subcommand's own usage error", args: []string{"mps-control", "-d"}, status: 2, stderr: "unsupported arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tt.args, strings.NewReader(""), &stdout, &stderr); got != tt.status || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("run(%q) = %d, stderr %q; want %d with %q", tt.args, got, stderr.String(), tt.status, tt.stderr)
			}
		})
	}
}
