package localcluster

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func withRange(t *testing.T, content string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "range")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	old := ephemeralRangeFile
	ephemeralRangeFile = p
	t.Cleanup(func() { ephemeralRangeFile = old })
}

func TestPortPickerRange(t *testing.T) {
	tests := []struct {
		content string
		lo, hi  int
		wantErr bool
	}{
		{"32768\t60999\n", 20000, 32767, false},
		{"1024 60999", 61000, 65535, false},
		{"10000 65000", 0, 0, true},
		{"garbage", 0, 0, true},
		{"40000 30000", 0, 0, true},
	}
	for _, tc := range tests {
		withRange(t, tc.content)
		p, err := newPortPicker()
		if tc.wantErr {
			if err == nil {
				t.Errorf("%q: no error", tc.content)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.content, err)
		}
		if p.lo != tc.lo || p.hi != tc.hi {
			t.Errorf("%q: range %d-%d, want %d-%d", tc.content, p.lo, p.hi, tc.lo, tc.hi)
		}
	}
}

// Under contention: many outbound connections hold ephemeral ports while
// the picker runs, and a port outside the range is held by a listener.
// Every port picked is outside the ephemeral range, distinct, and still
// bindable, which is what the cluster's components then do.
func TestPortPickerUnderContention(t *testing.T) {
	lo, hi, err := ephemeralRange()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	p, err := newPortPicker()
	if err != nil {
		t.Fatal(err)
	}
	// Occupy the port the scan starts at: it must be skipped.
	busy, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.next))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	seen := map[int]bool{}
	for range 100 {
		port, err := p.pick()
		if err != nil {
			t.Fatal(err)
		}
		if port >= lo && port <= hi {
			t.Fatalf("port %d is inside the ephemeral range %d-%d", port, lo, hi)
		}
		if seen[port] || port == busy.Addr().(*net.TCPAddr).Port {
			t.Fatalf("port %d given twice or busy", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("picked port %d cannot be bound: %v", port, err)
		}
		l.Close()
	}
}
