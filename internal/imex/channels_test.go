package imex

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// procDevices is /proc/devices of a GB200 tray's kernel, trimmed: the
// channels' region among the char devices, and block devices after.
const procDevices = `Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
  4 ttyS
  5 /dev/tty
  5 /dev/console
  5 /dev/ptmx
  7 vcs
 10 misc
 13 input
 29 fb
 89 i2c
128 ptm
136 pts
180 usb
189 usb_device
195 nvidia
195 nvidiactl
234 nvidia-caps-imex-channels
235 nvidia-caps
236 nvidia-uvm
237 nvidia-nvswitch
238 nvidia-nvlink
254 gpiochip

Block devices:
  7 loop
  8 sd
  9 md
 65 sd
253 device-mapper
259 blkext
`

// paramsWith replaces the ImexChannelCount line of params.
func paramsWith(line string) string {
	return strings.Replace(params, "ImexChannelCount: 2048\n", line, 1)
}

// params is /proc/driver/nvidia/params of an r570 driver, trimmed.
const params = `ResmanDebugLevel: 4294967295
RmLogonRC: 1
ModifyDeviceFiles: 1
DeviceFileUID: 0
DeviceFileGID: 0
DeviceFileMode: 438
EnableMSI: 1
NvLinkDisable: 0
RmProfilingAdminOnly: 1
EnableGpuFirmware: 18
EnableGpuFirmwareLogs: 2
DmaRemapPeerMmio: 1
ImexChannelCount: 2048
CreateImexChannel0: 0
GrdmaPciTopoCheckOverride: 0
RegistryDwords: ""
RegistryDwordsPerDevice: ""
RmMsg: ""
GpuBlacklist: ""
TemporaryFilePath: ""
ExcludedGpus: ""
`

func TestChannelsMajor(t *testing.T) {
	noChar := strings.Replace(procDevices, "234 nvidia-caps-imex-channels\n", "", 1)
	tests := []struct {
		name      string
		in        string
		want      uint32
		wantErr   string
		noChannel bool
	}{
		{name: "registered", in: procDevices, want: 234},
		{name: "IMEX disabled", in: noChar, wantErr: "lists no char device region nvidia-caps-imex-channels", noChannel: true},
		{name: "only a block device of that name", in: noChar + "240 nvidia-caps-imex-channels\n", wantErr: "lists no char device region", noChannel: true},
		{name: "a longer name is another region", in: strings.Replace(procDevices, "imex-channels", "imex-channels-old", 1), wantErr: "lists no char", noChannel: true},
		{name: "bad major", in: strings.Replace(procDevices, "234 nvidia-caps-imex", "x34 nvidia-caps-imex", 1), wantErr: `line 20 "x34 nvidia-caps-imex-channels"`},
		{name: "major too large", in: strings.Replace(procDevices, "234 nvidia-caps-imex", "4294967296 nvidia-caps-imex", 1), wantErr: "line 20"},
		{name: "not /proc/devices", in: "MemTotal: 1 kB\n", wantErr: `no "Character devices:" section`},
		{name: "empty", in: "", wantErr: `no "Character devices:" section`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChannelsMajor([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ChannelsMajor = %d, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ChannelsMajor = %d, %v; want an error with %q", got, err, tt.wantErr)
			}
			if errors.Is(err, ErrNoChannels) != tt.noChannel {
				t.Errorf("errors.Is(%v, ErrNoChannels) = %v, want %v", err, !tt.noChannel, tt.noChannel)
			}
		})
	}
}

func TestChannelCount(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      int
		wantErr   string
		noChannel bool
	}{
		{name: "default listed", in: params, want: 2048},
		{name: "set", in: paramsWith("ImexChannelCount: 128\n"), want: 128},
		{name: "not listed (older driver)", in: paramsWith(""), want: DefaultChannelCount},
		{name: "spaces", in: paramsWith("ImexChannelCount:   16  \n"), want: 16},
		{name: "disabled", in: paramsWith("ImexChannelCount: 0\n"), wantErr: "ImexChannelCount is 0 in /proc/driver/nvidia/params (line 13)", noChannel: true},
		{name: "not a number", in: paramsWith("ImexChannelCount: many\n"), wantErr: `line 13 "ImexChannelCount: many": ImexChannelCount "many" is not a channel count`},
		{name: "negative", in: paramsWith("ImexChannelCount: -1\n"), wantErr: "line 13"},
		{name: "beyond a minor", in: paramsWith("ImexChannelCount: 1048577\n"), wantErr: "line 13"},
		{name: "empty", in: "", want: DefaultChannelCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChannelCount([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ChannelCount = %d, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ChannelCount = %d, %v; want an error with %q", got, err, tt.wantErr)
			}
			if errors.Is(err, ErrNoChannels) != tt.noChannel {
				t.Errorf("errors.Is(%v, ErrNoChannels) = %v, want %v", err, !tt.noChannel, tt.noChannel)
			}
		})
	}
}

func TestChannelNode(t *testing.T) {
	if got := ChannelPath(0); got != "/dev/nvidia-caps-imex-channels/channel0" {
		t.Errorf("ChannelPath(0) = %q", got)
	}
	n := ChannelNode(234, 17)
	if n.Path != "/dev/nvidia-caps-imex-channels/channel17" || n.Type != "c" || n.Major != 234 || n.Minor != 17 ||
		n.FileMode == nil || *n.FileMode != os.FileMode(0o666) || n.Permissions != "rw" || n.HostPath != "" || n.UID != nil || n.GID != nil {
		t.Errorf("ChannelNode(234, 17) = %+v (mode %v)", n, n.FileMode)
	}
	// Each node has its own mode: changing one must not change another's.
	*n.FileMode = 0o600
	if m := ChannelNode(234, 1).FileMode; *m != 0o666 {
		t.Errorf("a node's mode is shared: %v", *m)
	}
}
