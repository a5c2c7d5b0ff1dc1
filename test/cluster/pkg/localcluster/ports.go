package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Ports for the cluster's components are chosen outside the kernel's
// ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range). A port
// found free by listening on :0 and closing comes from that range, and the
// kernel can hand it to any outbound connection before the component binds
// it: `make demo` once failed that way ("bind: address already in use").
// Outside the range the kernel never picks a port by itself; only a program
// that binds that very number can take it, and the start of the scan is
// random so two clusters on one machine do not walk the same ports.

const (
	// lowestPort is the bottom of the ports chosen below the ephemeral
	// range: above the well-known and most registered service ports.
	lowestPort = 20000
	// minSpan is the least room a side of the ephemeral range must leave
	// to be used.
	minSpan = 1000
)

// ephemeralRangeFile is read for the kernel's ephemeral range (tests swap it).
var ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// portPicker hands out distinct free ports on 127.0.0.1 outside the
// ephemeral range.
type portPicker struct {
	lo, hi int // the range chosen from, inclusive
	next   int
	given  map[int]bool
}

func newPortPicker() (*portPicker, error) {
	elo, ehi, err := ephemeralRange()
	if err != nil {
		return nil, err
	}
	p := &portPicker{given: map[int]bool{}}
	switch {
	case elo-lowestPort >= minSpan:
		p.lo, p.hi = lowestPort, elo-1
	case 65535-ehi >= minSpan:
		p.lo, p.hi = ehi+1, 65535
	default:
		return nil, fmt.Errorf("the ephemeral port range %d-%d (%s) leaves fewer than %d ports outside it for the cluster", elo, ehi, ephemeralRangeFile, minSpan)
	}
	p.next = p.lo + rand.IntN(p.hi-p.lo+1)
	return p, nil
}

// ephemeralRange reads the kernel's ephemeral port range.
func ephemeralRange() (lo, hi int, err error) {
	data, err := os.ReadFile(ephemeralRangeFile)
	if err != nil {
		return 0, 0, fmt.Errorf("read the ephemeral port range: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%s: %q is not two numbers", ephemeralRangeFile, data)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("%s: %q is not a port range", ephemeralRangeFile, data)
	}
	return lo, hi, nil
}

// pick returns a port no component of this cluster has and nothing listens
// on now.
func (p *portPicker) pick() (int, error) {
	for range p.hi - p.lo + 1 {
		port := p.next
		p.next++
		if p.next > p.hi {
			p.next = p.lo
		}
		if p.given[port] || !bindable(port) {
			continue
		}
		p.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d", p.lo, p.hi)
}

func bindable(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
