package memlimit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Setter sets and lifts a limit on one cgroup (cg, below root).
type Setter interface {
	Set(root, cg string, l Limit) error
	Lift(root, cg string, l Limit) error
}

// Env is what the hook reaches on its node: /proc of the runtime's PID
// namespace and, for the NVML mechanism, its Setter (package nvmllimit,
// kept apart so that only the hook binary links NVML through cgo).
type Env struct {
	// Proc is the runtime's /proc ("/proc" when empty).
	Proc string
	// NVML sets limits through the NVIDIA library; nil fails the NVML
	// mechanism.
	NVML Setter
}

func (e Env) proc() string {
	if e.Proc == "" {
		return "/proc"
	}
	return e.Proc
}

func (e Env) setter(h Hook, m Mechanism) (Setter, error) {
	switch {
	case h.Simulated && m == Dmem:
		return simulatedDmem{}, nil
	case h.Simulated:
		return nil, fmt.Errorf("the simulator's cgroup tree takes the dmem mechanism only, not %s", m)
	case m == Dmem:
		return dmem{}, nil
	case m == NVML && e.NVML != nil:
		return e.NVML, nil
	case m == NVML:
		return nil, errors.New("this program was built without NVML")
	}
	return nil, fmt.Errorf("%q is not a memory limit mechanism", m)
}

// dmem writes the kernel's dmem files (amdgpu, xe).
type dmem struct{}

func (dmem) Set(root, cg string, l Limit) error {
	d, err := dir(root, cg)
	if err != nil {
		return err
	}
	if err := enableDmem(root, cg); err != nil {
		return err
	}
	return writeDmemMax(d, l.Region, strconv.FormatInt(l.Bytes, 10))
}

func (dmem) Lift(root, cg string, l Limit) error {
	d, err := dir(root, cg)
	if err != nil {
		return err
	}
	return writeDmemMax(d, l.Region, "max")
}

// simulatedDmem plays the kernel in the simulator's tree: the container's
// cgroup directory is made there, mirroring the host's path, with the
// dmem.max the kernel would show; lifting removes the directory, as the
// runtime removes a real cgroup with its container.
type simulatedDmem struct{}

func (simulatedDmem) Set(root, cg string, l Limit) error {
	if _, err := os.Stat(filepath.Join(root, "dmem.capacity")); err != nil {
		return fmt.Errorf("the simulated node's cgroup root offers no dmem controller: %w", err)
	}
	d, err := dir(root, cg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("simulated cgroup %s: %w", cg, err)
	}
	return simulatedDmemMax(d, l.Region, strconv.FormatInt(l.Bytes, 10))
}

func (simulatedDmem) Lift(root, cg string, _ Limit) error {
	d, err := dir(root, cg)
	if err != nil {
		return err
	}
	return os.RemoveAll(d)
}
