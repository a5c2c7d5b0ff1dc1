package imex

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NodesFile is the nodes file listing peers, the domain's IMEX peers (the
// node itself among them), in the order given. Each is an IP address or a
// lowercase DNS name, none twice, at least one.
//
// Every daemon of a domain must get the same list in the same order
// (NVIDIA IMEX guide: daemons whose lists differ fail to initialize), so
// callers that build it on each node must sort it, or otherwise order it
// the same way everywhere; NodesFile keeps the order so that a list made
// elsewhere can be reproduced exactly.
func NodesFile(peers []string) ([]byte, error) {
	if len(peers) == 0 {
		return nil, errors.New("an IMEX nodes file needs at least one peer (the node itself)")
	}
	seen := map[string]int{}
	var b bytes.Buffer
	for i, p := range peers {
		key, err := peerKey(p)
		if err != nil {
			return nil, fmt.Errorf("IMEX peer %d: %w", i+1, err)
		}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("IMEX peer %d %q: the same as peer %d", i+1, p, first)
		}
		seen[key] = i + 1
		b.WriteString(p + "\n")
	}
	return b.Bytes(), nil
}

// ParseNodesFile reads a nodes file: one peer a line, spaces around it
// trimmed. Blank lines and lines starting with '#' are skipped, which the
// daemon may not do: NodesFile writes neither. A line that is no IP
// address or DNS name, a peer given twice or no peer at all is an error
// naming the line.
func ParseNodesFile(data []byte) ([]string, error) {
	var peers []string
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		key, err := peerKey(p)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("line %d: peer %q is the same as line %d's", n, p, first)
		}
		seen[key] = n
		peers = append(peers, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(peers) == 0 {
		return nil, errors.New("no IMEX peers listed")
	}
	return peers, nil
}

// peerKey checks that p is an IP address or a DNS name and returns what
// identifies it: an address in its canonical form, so that "::1" and
// "0::1" are one peer.
func peerKey(p string) (string, error) {
	if a, err := netip.ParseAddr(p); err == nil {
		return a.String(), nil
	}
	if errs := validation.IsDNS1123Subdomain(p); len(errs) > 0 {
		return "", fmt.Errorf("%q is neither an IP address nor a DNS name: %s", p, strings.Join(errs, "; "))
	}
	return p, nil
}
