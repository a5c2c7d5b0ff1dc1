package imex

import (
	"slices"
	"strings"
	"testing"
)

func TestNodesFile(t *testing.T) {
	tests := []struct {
		name    string
		peers   []string
		want    string
		wantErr string
	}{
		{name: "order kept", peers: []string{"10.0.0.3", "10.0.0.1", "tray-2.rack-a.example.com", "fd00::4"}, want: "10.0.0.3\n10.0.0.1\ntray-2.rack-a.example.com\nfd00::4\n"},
		{name: "one", peers: []string{"127.0.0.1"}, want: "127.0.0.1\n"},
		{name: "none", wantErr: "at least one peer"},
		{name: "duplicate", peers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.1"}, wantErr: `IMEX peer 3 "10.0.0.1": the same as peer 1`},
		{name: "one address two spellings", peers: []string{"fd00::4", "fd00:0::4"}, wantErr: "the same as peer 1"},
		{name: "not a name", peers: []string{"10.0.0.1", "tray 2"}, wantErr: `IMEX peer 2: "tray 2" is neither an IP address nor a DNS name`},
		{name: "with a port", peers: []string{"10.0.0.1:50000"}, wantErr: "neither an IP address"},
		{name: "upper case", peers: []string{"Tray-1"}, wantErr: "neither an IP address"},
		{name: "empty", peers: []string{""}, wantErr: "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodesFile(tt.peers)
			if tt.wantErr == "" {
				if err != nil || string(got) != tt.want {
					t.Fatalf("NodesFile = %q, %v; want %q", got, err, tt.want)
				}
				back, err := ParseNodesFile(got)
				if err != nil || !slices.Equal(back, tt.peers) {
					t.Errorf("ParseNodesFile(NodesFile()) = %q, %v", back, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NodesFile = %q, %v; want an error with %q", got, err, tt.wantErr)
			}
		})
	}
}

func TestParseNodesFile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "written by hand", in: "# rack a\n10.0.0.1\n  10.0.0.2  \n\n10.0.0.3\n", want: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{name: "no newline at the end", in: "10.0.0.1\n10.0.0.2", want: []string{"10.0.0.1", "10.0.0.2"}},
		{name: "empty", in: "\n# nobody\n", wantErr: "no IMEX peers listed"},
		{name: "bad line", in: "10.0.0.1\n10.0.0.2 10.0.0.3\n", wantErr: `line 2: "10.0.0.2 10.0.0.3" is neither`},
		{name: "duplicate", in: "10.0.0.1\n#\n10.0.0.1\n", wantErr: `line 3: peer "10.0.0.1" is the same as line 1's`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNodesFile([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil || !slices.Equal(got, tt.want) {
					t.Fatalf("ParseNodesFile = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseNodesFile = %q, %v; want an error with %q", got, err, tt.wantErr)
			}
		})
	}
}
