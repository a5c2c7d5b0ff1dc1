package localcluster

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Down stops every process of the state file (nodes first, etcd last),
// restores the sysctls the kubelets changed, unmounts what they mounted under
// Dir and removes the nodes' run dirs. It is safe to run twice and with no
// cluster at all.
func (c *Config) Down(out io.Writer) error {
	s, err := c.LoadState()
	if err != nil {
		return err
	}
	var errs []error
	for i := len(s.Procs) - 1; i >= 0; i-- {
		p := s.Procs[i]
		if alive(p) {
			fmt.Fprintf(out, "stopping %s (pid %d)\n", p.Name, p.Pid)
		}
		if err := stop(p, 15*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Runtime == RuntimeContainerd {
		for _, n := range s.Nodes {
			errs = append(errs, c.stopContainers(n.Name)...)
		}
	}
	errs = append(errs, c.stopStrays(out, s.Nodes)...)
	errs = append(errs, restoreSysctls(s.Sysctls)...)
	errs = append(errs, unmountAll(c.Dir)...)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range s.Nodes {
		if err := c.removeRunDir(n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Restored once: a second Down must not overwrite later changes.
	s.Procs, s.Sysctls = nil, nil
	if len(s.Nodes) == 0 && len(s.Ports) == 0 {
		return nil // nothing was ever started here
	}
	return c.saveState(s)
}
