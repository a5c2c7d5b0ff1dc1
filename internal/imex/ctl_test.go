package imex

import "testing"

func TestParseQuery(t *testing.T) {
	tests := []struct {
		out    string
		ready  bool
		status string
	}{
		{out: "READY\n", ready: true, status: "READY"},
		{out: "  READY  \r\n", ready: true, status: "READY"},
		{out: "NOT_READY: waiting for 10.0.0.3 (1 of 4 peers connected)\n", status: "NOT_READY: waiting for 10.0.0.3 (1 of 4 peers connected)"},
		{out: "UNAVAILABLE\n", status: "UNAVAILABLE"},
		{out: "Ready\n", status: "Ready"},
		{out: "READY\nREADY\n", status: "READY\nREADY"},
		{out: "", status: ""},
	}
	for _, tt := range tests {
		if ready, status := ParseQuery([]byte(tt.out)); ready != tt.ready || status != tt.status {
			t.Errorf("ParseQuery(%q) = %v, %q; want %v, %q", tt.out, ready, status, tt.ready, tt.status)
		}
	}
}
