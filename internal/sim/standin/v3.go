package standin

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// startServers serves the configuration's servers: each its listener, its
// default namespace and its configured namespaces.
func (d *Daemon) startServers(cfg *Config) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		sc := cfg.Servers[name]
		s := ServerStatus{AllowedDevices: sc.AllowedDevices, Limits: sc.Limits, Namespaces: maps.Clone(sc.Namespaces)}
		for _, ns := range append([]string{"", DefaultNamespace}, slices.Sorted(maps.Keys(sc.Namespaces))...) {
			if err := d.openSocket(name, ns); err != nil {
				return fmt.Errorf("server %s: %w", name, err)
			}
		}
		d.status.Servers[name] = s
	}
	return nil
}

// handleV3 runs an admin command of a protocol 3 daemon.
func (d *Daemon) handleV3(f []string) (out string, quit bool, err error) {
	command := strings.Join(f[:min(2, len(f))], " ")
	switch {
	case f[0] == "quit" || f[0] == "get_server_list":
		if len(f) != 1 {
			return "", false, fmt.Errorf("%s takes 0 argument(s), got %d", f[0], len(f)-1)
		}
		return "", f[0] == "quit", nil
	case slices.Contains(legacyCommands, f[0]):
		return "", false, fmt.Errorf("%s is a protocol 2 command and this daemon runs protocol 3 (namespace, server and client commands)", f[0])
	case len(f) < 2 && (f[0] == moduleNamespace || f[0] == moduleServer):
		return "", false, fmt.Errorf("%s needs a verb", f[0])
	case command == moduleServer+" list":
		if _, err := parseFlags(command, f[2:]); err != nil {
			return "", false, err
		}
		return strings.Join(slices.Sorted(maps.Keys(d.status.Servers)), "\n"), false, nil
	case command == moduleNamespace+" create":
		return "", false, d.namespaceCreate(command, f[2:])
	case command == moduleNamespace+" delete":
		return "", false, d.namespaceDelete(command, f[2:])
	case command == moduleNamespace+" list":
		s, _, err := d.server(command, f[2:], nil)
		if err != nil {
			return "", false, err
		}
		return strings.Join(slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(s.Namespaces)), DefaultNamespace))), "\n"), false, nil
	case command == moduleNamespace+" get":
		s, fl, err := d.server(command, f[2:], []string{flagName})
		if err != nil {
			return "", false, err
		}
		ns := fl[flagName]
		if ns == DefaultNamespace {
			// The default namespace's clients get the server's limits.
			return s.Limits.String(), false, nil
		}
		l, ok := s.Namespaces[ns]
		if !ok {
			return "", false, fmt.Errorf("%s: server %s has no namespace %q", command, fl[flagServer], ns)
		}
		return l.String(), false, nil
	}
	return "", false, fmt.Errorf("unknown command %q", command)
}

// server parses args as --server, the required flags and the optional
// ones, and finds the server.
func (d *Daemon) server(command string, args []string, required []string, optional ...string) (ServerStatus, flags, error) {
	required = append([]string{flagServer}, required...)
	fl, err := parseFlags(command, args, append(slices.Clone(required), optional...)...)
	if err == nil {
		err = fl.need(command, required...)
	}
	if err != nil {
		return ServerStatus{}, nil, err
	}
	s, ok := d.status.Servers[fl[flagServer]]
	if !ok {
		return ServerStatus{}, nil, fmt.Errorf("%s: no server %q (servers: %s)", command, fl[flagServer], strings.Join(slices.Sorted(maps.Keys(d.status.Servers)), ","))
	}
	return s, fl, nil
}

func (d *Daemon) namespaceCreate(command string, args []string) error {
	s, fl, err := d.server(command, args, []string{flagName}, flagPinnedMemoryLimit, flagActiveThreadPercentage)
	if err != nil {
		return err
	}
	server, name := fl[flagServer], fl[flagName]
	if err := checkNamespaceName(name); err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	l, err := parseLimits(fl[flagPinnedMemoryLimit], fl[flagActiveThreadPercentage])
	if err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	if have, ok := s.Namespaces[name]; ok {
		if !have.same(l) {
			return fmt.Errorf("%s: namespace %s/%s exists with %s, not %s", command, server, name, have, l)
		}
		return nil
	}
	if err := d.openSocket(server, name); err != nil {
		return fmt.Errorf("%s: namespace %s/%s: %w", command, server, name, err)
	}
	s.Namespaces[name] = l
	return nil
}

// namespaceDelete stops serving the namespace, drops its clients and
// removes its directory; a namespace that does not exist is gone already.
func (d *Daemon) namespaceDelete(command string, args []string) error {
	s, fl, err := d.server(command, args, []string{flagName})
	if err != nil {
		return err
	}
	server, name := fl[flagServer], fl[flagName]
	if name == DefaultNamespace {
		return fmt.Errorf("%s: the default namespace is never deleted", command)
	}
	if err := checkName("namespace", name); err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	if _, ok := s.Namespaces[name]; !ok {
		return nil
	}
	delete(s.Namespaces, name)
	d.dropClients(func(c *client) bool { return c.Server == server && c.Namespace == name })
	if err := d.closeSocket(socketKey(server, name)); err != nil {
		return fmt.Errorf("%s: namespace %s/%s: %w", command, server, name, err)
	}
	if err := os.RemoveAll(d.socketDir(server, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: namespace %s/%s: %w", command, server, name, err)
	}
	return nil
}
