package standin

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PingTimeout is how long a client in another PID namespace stays listed
// without a ping: its PID means nothing in the daemon's /proc.
const PingTimeout = 30 * time.Second

// client is a connected client session. PIDs of clients in different PID
// namespaces collide, so a session is its socket's server and namespace,
// its PID and its PID namespace.
type client struct {
	ClientStatus
	lastPing time.Time
}

func (c *client) is(server, namespace string, pid int, pidNS string) bool {
	return c.Server == server && c.Namespace == namespace && c.PID == pid && c.PIDNamespace == pidNS
}

// clientCommand runs "client <verb> ..." read from sock.
func (d *Daemon) clientCommand(sock *socket, args []string) (string, error) {
	if len(args) == 0 {
		return "", fmt.Errorf("%s needs a verb", moduleClient)
	}
	command := moduleClient + " " + args[0]
	if args[0] == "list" {
		if !sock.admin() {
			return "", fmt.Errorf("%q is not allowed on a namespace socket (%s): only a client's own commands are", command, sock.name())
		}
		fl, err := parseFlags(command, args[1:], flagAll)
		if err != nil {
			return "", err
		}
		if _, ok := fl[flagAll]; !ok {
			return "", fmt.Errorf("%s: --%s is required", command, flagAll)
		}
		var lines []string
		for _, c := range d.sortedClients() {
			line := strconv.Itoa(c.PID)
			if c.Server != "" {
				line += " " + c.Server + "/" + c.Namespace
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n"), nil
	}
	fl, err := parseFlags(command, args[1:], flagPID, flagPIDNamespace)
	if err != nil {
		return "", err
	}
	if err := fl.need(command, flagPID); err != nil {
		return "", err
	}
	pid, err := strconv.Atoi(fl[flagPID])
	if err != nil || pid < 1 {
		return "", fmt.Errorf("%s: --%s=%q is not a PID", command, flagPID, fl[flagPID])
	}
	pidNS := fl[flagPIDNamespace]
	now := d.now()
	i := slices.IndexFunc(d.clients, func(c *client) bool { return c.is(sock.server, sock.namespace, pid, pidNS) })
	switch args[0] {
	case "connect":
		if i >= 0 {
			d.clients[i].lastPing = now
			return "", nil
		}
		d.clients = append(d.clients, &client{
			ClientStatus: ClientStatus{PID: pid, PIDNamespace: pidNS, Server: sock.server, Namespace: sock.namespace, Since: now},
			lastPing:     now,
		})
		d.dirty = true
		return "", nil
	case "ping", "disconnect":
		if i < 0 {
			where := ""
			if !sock.admin() {
				where = " in " + sock.name()
			}
			return "", &codedError{code: codeUnknownClient, msg: fmt.Sprintf("%s: no client session of PID %d%s", command, pid, where)}
		}
		if args[0] == "ping" {
			d.clients[i].lastPing = now
			return "", nil
		}
		d.clients = slices.Delete(d.clients, i, i+1)
		d.dirty = true
		return "", nil
	}
	return "", fmt.Errorf("unknown command %q", command)
}

// isPing says whether command is a client's ping.
func isPing(command string) bool {
	f := strings.Fields(command)
	return len(f) >= 2 && f[0] == moduleClient && f[1] == "ping"
}

// prune drops the sessions of clients gone: a PID of the daemon's own PID
// namespace that its /proc no longer has, or else no ping for PingTimeout.
func (d *Daemon) prune(now time.Time) {
	d.dropClients(func(c *client) bool {
		if c.PIDNamespace != "" && c.PIDNamespace == d.pidNS {
			_, err := os.Stat("/proc/" + strconv.Itoa(c.PID))
			return err != nil
		}
		return now.Sub(c.lastPing) > PingTimeout
	})
}

func (d *Daemon) dropClients(gone func(*client) bool) {
	n := len(d.clients)
	d.clients = slices.DeleteFunc(d.clients, gone)
	if len(d.clients) != n {
		d.dirty = true
	}
}

func (d *Daemon) sortedClients() []*client {
	cs := slices.Clone(d.clients)
	slices.SortFunc(cs, func(a, b *client) int {
		return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.Server, b.Server), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.PIDNamespace, b.PIDNamespace))
	})
	return cs
}

func (d *Daemon) clientStatus() []ClientStatus {
	out := []ClientStatus{}
	for _, c := range d.sortedClients() {
		out = append(out, c.ClientStatus)
	}
	return out
}

// pidNamespace is the inode number of this process's PID namespace, or ""
// where /proc does not say.
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	// "pid:[4026531836]"
	return strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
}

// newInstance names one run of a daemon: PIDs repeat, in pods especially.
func newInstance() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
