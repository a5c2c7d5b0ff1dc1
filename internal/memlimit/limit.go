package memlimit

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Mechanism is how a limit is set on a cgroup.
type Mechanism string

const (
	// Dmem writes "<region> <bytes>" into the cgroup's dmem.max.
	Dmem Mechanism = "dmem"
	// NVML calls nvmlDeviceSetMemoryLimits_v1 with the cgroup's directory.
	NVML Mechanism = "nvml"
)

// ParseMechanism parses a mechanism's name.
func ParseMechanism(s string) (Mechanism, error) {
	switch m := Mechanism(s); m {
	case Dmem, NVML:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a memory limit mechanism (dmem or nvml)", s)
}

// Limit is one device's limit for the containers of one claim.
type Limit struct {
	// ClaimUID and Claim (namespace/name) name the claim, for the record
	// and every error.
	ClaimUID, Claim string
	// Device is the device's name in its pool.
	Device    string
	Mechanism Mechanism
	// Region is the GPU's dmem region ("drm/0000:03:00.0/vram0"): the line
	// Dmem writes, and the one a reader finds the limit under.
	Region string
	// GPU is the GPU's UUID, the device NVML sets the limit on.
	GPU string
	// Bytes is the hard limit, a whole number of MiB.
	Bytes int64
	// EachContainer limits every container of the claim device on its own
	// (an MPS claim's pinned memory limit, which MPS too applies per
	// client), instead of one container holding the share at a time.
	EachContainer bool `json:"eachContainer,omitempty"`
}

// Bytes rounds a share's memory down to whole MiB, the unit NVIDIA's tools
// and hook take, so the limit never exceeds what the share consumed. A
// share under 1 MiB has no limit that holds it: an error.
func Bytes(share int64) (int64, error) {
	b := share &^ (1<<20 - 1)
	if b <= 0 {
		return 0, fmt.Errorf("a memory share of %d bytes is under 1MiB: no kernel limit can hold it", share)
	}
	return b, nil
}

// String is the limit for logs and statuses: "7168MiB of nvidia/0000:83:00.0/vidmem (dmem)".
func (l Limit) String() string {
	return fmt.Sprintf("%dMiB of %s (%s)", l.Bytes>>20, l.Region, l.Mechanism)
}

func (l Limit) validate() error {
	var errs []error
	if l.ClaimUID == "" || strings.ContainsAny(l.ClaimUID, "/.") {
		errs = append(errs, fmt.Errorf("--claim-uid %q is not a claim UID", l.ClaimUID))
	}
	if l.Device == "" || strings.ContainsAny(l.Device, "/") {
		errs = append(errs, fmt.Errorf("--device %q is not a device name", l.Device))
	}
	if _, err := ParseMechanism(string(l.Mechanism)); err != nil {
		errs = append(errs, fmt.Errorf("--mechanism: %w", err))
	}
	if l.Region == "" || strings.ContainsAny(l.Region, " \n") {
		errs = append(errs, fmt.Errorf("--region %q is not a dmem region", l.Region))
	}
	if l.Mechanism == NVML && l.GPU == "" {
		errs = append(errs, errors.New("--gpu: the nvml mechanism needs the GPU's UUID"))
	}
	if l.Bytes <= 0 || l.Bytes%(1<<20) != 0 {
		errs = append(errs, fmt.Errorf("--bytes %d is not a positive whole number of MiB", l.Bytes))
	}
	return errors.Join(errs...)
}

// Hook is how a node runs the hook: the binary on the host, and where it
// finds cgroups and keeps its records.
type Hook struct {
	// Path is the hook binary on the host, where the runtime runs it.
	Path string
	// CgroupRoot is the node's cgroup v2 mount (/sys/fs/cgroup).
	CgroupRoot string
	// StateDir holds a record per claim device whose limit a container
	// holds (/run/tessera/memory-limits: gone with a reboot, as the cgroups).
	StateDir string
	// Simulated is true where CgroupRoot is the simulator's tree, not the
	// kernel's: the hook makes the container's cgroup directory there,
	// mirroring the host's path, and removes it when the container goes, as
	// the runtime removes a real one.
	Simulated bool
}

// DefaultStateDir is the hook's state directory on a node.
const DefaultStateDir = "/run/tessera/memory-limits"

func (h Hook) validate() error {
	var errs []error
	for flag, p := range map[string]string{"--cgroup-root": h.CgroupRoot, "--state-dir": h.StateDir} {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("%s %q is not an absolute path", flag, p))
		}
	}
	return errors.Join(errs...)
}

// Subcommands of the hook binary.
const (
	CmdLimit   = "limit"
	CmdRelease = "release"
	// CmdCheck exits 0: the agent runs it at start to learn that the hook
	// runs from where it is installed (not a noexec mount, a binary this
	// host can load), before it advertises kernel-held shares.
	CmdCheck = "check"
)

// LimitArgs is the hook's argv (argv[0] first, as OCI hooks take it) that
// sets l on the container being created.
func (h Hook) LimitArgs(l Limit) []string {
	args := append(h.common(CmdLimit),
		"--claim-uid="+l.ClaimUID, "--claim="+l.Claim, "--device="+l.Device,
		"--mechanism="+string(l.Mechanism), "--region="+l.Region, "--bytes="+strconv.FormatInt(l.Bytes, 10))
	if l.GPU != "" {
		args = append(args, "--gpu="+l.GPU)
	}
	if l.EachContainer {
		args = append(args, "--each-container")
	}
	return args
}

// ReleaseArgs is the hook's argv that forgets what the container held when
// it is deleted.
func (h Hook) ReleaseArgs() []string { return h.common(CmdRelease) }

func (h Hook) common(cmd string) []string {
	args := []string{filepath.Base(h.Path), cmd, "--cgroup-root=" + h.CgroupRoot, "--state-dir=" + h.StateDir}
	if h.Simulated {
		args = append(args, "--simulated")
	}
	return args
}

// Parse reads the arguments after the subcommand: the hook, and for
// CmdLimit the limit, each checked.
func Parse(cmd string, args []string) (Hook, Limit, error) {
	var (
		h Hook
		l Limit
	)
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&h.CgroupRoot, "cgroup-root", "/sys/fs/cgroup", "the node's cgroup v2 mount")
	fs.StringVar(&h.StateDir, "state-dir", DefaultStateDir, "where the hook records which container holds which claim device")
	fs.BoolVar(&h.Simulated, "simulated", false, "the cgroup root is the simulator's tree")
	if cmd == CmdLimit {
		fs.StringVar(&l.ClaimUID, "claim-uid", "", "the claim's UID")
		fs.StringVar(&l.Claim, "claim", "", "the claim's namespace/name")
		fs.StringVar(&l.Device, "device", "", "the device's name")
		fs.StringVar((*string)(&l.Mechanism), "mechanism", "", "dmem or nvml")
		fs.StringVar(&l.Region, "region", "", "the GPU's dmem region")
		fs.StringVar(&l.GPU, "gpu", "", "the GPU's UUID (nvml)")
		fs.Int64Var(&l.Bytes, "bytes", 0, "the hard limit in bytes")
		fs.BoolVar(&l.EachContainer, "each-container", false, "limit each container of the claim device on its own, not one at a time")
	}
	if err := fs.Parse(args); err != nil {
		return h, l, fmt.Errorf("%s: %w", cmd, err)
	}
	if fs.NArg() > 0 {
		return h, l, fmt.Errorf("%s: unexpected arguments %q", cmd, fs.Args())
	}
	err := h.validate()
	if cmd == CmdLimit {
		err = errors.Join(err, l.validate())
	}
	if err != nil {
		return h, l, fmt.Errorf("%s: %w", cmd, err)
	}
	return h, l, nil
}
