package imex

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// ChannelsRegion is the name of the char device region of IMEX channels,
// as /proc/devices lists it (open-gpu-kernel-modules).
const ChannelsRegion = "nvidia-caps-imex-channels"

// ChannelsDir is where channel device nodes live, one per channel:
// channel N is ChannelsDir/channelN.
const ChannelsDir = "/dev/" + ChannelsRegion

// DefaultChannelCount is NVreg_ImexChannelCount's default: the number of
// channels when /proc/driver/nvidia/params does not say.
const DefaultChannelCount = 2048

// maxChannelCount bounds a channel count to what a Linux minor number can
// hold (20 bits): more cannot be a real module's.
const maxChannelCount = 1 << 20

// ErrNoChannels is wrapped by errors saying this node has no IMEX
// channels: the region is not registered (IMEX disabled, or a driver
// without IMEX) or the module was loaded with NVreg_ImexChannelCount=0.
var ErrNoChannels = errors.New("no IMEX channels")

// ChannelsMajor is the major number of the IMEX channel region in
// procDevices, the contents of /proc/devices. Only its "Character
// devices:" section counts: a block device of that name is no channel.
func ChannelsMajor(procDevices []byte) (uint32, error) {
	sc := bufio.NewScanner(bytes.NewReader(procDevices))
	section, sawChar := "", false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		// Each section starts with a "<Kind> devices:" header line.
		if strings.HasSuffix(line, "devices:") {
			section = line
			sawChar = sawChar || line == "Character devices:"
			continue
		}
		f := strings.Fields(line)
		if section != "Character devices:" || len(f) != 2 || f[1] != ChannelsRegion {
			continue
		}
		major, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("/proc/devices line %d %q: major of %s: %w", n, line, ChannelsRegion, err)
		}
		return uint32(major), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading /proc/devices: %w", err)
	}
	if !sawChar {
		return 0, errors.New(`/proc/devices has no "Character devices:" section`)
	}
	return 0, fmt.Errorf("%w: /proc/devices lists no char device region %s (IMEX disabled with NVreg_ImexChannelCount=0, or a driver without IMEX)", ErrNoChannels, ChannelsRegion)
}

// ChannelCount is the number of IMEX channels the module was loaded with,
// read from params, the contents of /proc/driver/nvidia/params (`Name:
// value` lines): ImexChannelCount's value, DefaultChannelCount when the
// module does not list it (older drivers), an error wrapping ErrNoChannels
// when it is 0.
func ChannelCount(params []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(params))
	for n := 1; sc.Scan(); n++ {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != "ImexChannelCount" {
			continue
		}
		v := strings.TrimSpace(value)
		count, err := strconv.Atoi(v)
		if err != nil || count < 0 || count > maxChannelCount {
			return 0, fmt.Errorf("/proc/driver/nvidia/params line %d %q: ImexChannelCount %q is not a channel count (0-%d)", n, sc.Text(), v, maxChannelCount)
		}
		if count == 0 {
			return 0, fmt.Errorf("%w: ImexChannelCount is 0 in /proc/driver/nvidia/params (line %d)", ErrNoChannels, n)
		}
		return count, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading /proc/driver/nvidia/params: %w", err)
	}
	return DefaultChannelCount, nil
}

// ChannelPath is the device node of channel n.
func ChannelPath(n int) string {
	return ChannelsDir + "/channel" + strconv.Itoa(n)
}

// channelFileMode lets everyone open the node: the channel a container
// is given, not file permissions, is the boundary between jobs (only the
// job's containers have the node at all), and every container of the job
// must open it whatever user it runs as.
const channelFileMode os.FileMode = 0o666

// ChannelNode is the CDI device node that gives a container channel n of
// the region with major (ChannelsMajor). The runtime creates it inside the
// container only, as the driver makes no node on the host. n must be a
// channel of the node, within [0, ChannelCount).
func ChannelNode(major uint32, n int) *cdispec.DeviceNode {
	mode := channelFileMode
	return &cdispec.DeviceNode{
		Path:        ChannelPath(n),
		Type:        "c",
		Major:       int64(major),
		Minor:       int64(n),
		FileMode:    &mode,
		Permissions: "rw",
	}
}
