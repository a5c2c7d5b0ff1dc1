package cdi

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

func channelNode(major int64, n int64) *cdispec.DeviceNode {
	mode := os.FileMode(0o666)
	return &cdispec.DeviceNode{Path: "/dev/nvidia-caps-imex-channels/channel" + itoa(n), Type: "c", Major: major, Minor: n, FileMode: &mode, Permissions: "rw"}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestChannelClaim: a claim of an IMEX channel alone gets one CDI device,
// resolved by the real CDI library into the channel's node with the given
// numbers (the driver makes none on the host: no host path, no stat); its
// record reads back as the checkpoint's; a channel beside GPUs follows
// them; a channel without a character node is refused.
func TestChannelClaim(t *testing.T) {
	w, dir := newTestWriter(t, simNumbers)
	claim := ClaimRef{UID: "0b9e8f4c-1d2a-4e6f-9a7b-3c5d7e9f1a2b", Namespace: "team", Name: "train-imex"}
	ch := Channel{Request: "channel", Pool: "imex-00000001-0000-0000-0000-000000000001.2", Device: "imex-channel-7", Node: channelNode(234, 7)}
	ids, err := w.WriteClaim(ClaimSpec{Claim: claim, Channels: []Channel{ch}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || len(ids[0]) != 1 {
		t.Fatalf("ids %v, want one for the channel", ids)
	}
	spec, err := inject(t, dir, ids[0]...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := devicesOf(t, spec), []node{{"/dev/nvidia-caps-imex-channels/channel7", "c", 234, 7}}; !reflect.DeepEqual(got, want) {
		t.Errorf("container devices %v, want %v", got, want)
	}
	// The cgroup lets the container read and write it, not make nodes.
	if r := spec.Linux.Resources.Devices; len(r) != 1 || !r[0].Allow || r[0].Type != "c" || *r[0].Major != 234 || *r[0].Minor != 7 || r[0].Access != "rw" {
		t.Errorf("cgroup rules %+v, want rw on the channel alone", r)
	}
	recs, err := w.ListClaimSpecs()
	if err != nil || len(recs) != 1 || len(recs[0].Devices) != 1 {
		t.Fatalf("recorded %+v, %v", recs, err)
	}
	if r := recs[0].Devices[0]; r.Pool != ch.Pool || r.Device != ch.Device || r.Request != ch.Request || !reflect.DeepEqual(r.CDIDeviceIDs, ids[0]) || r.GPUUUID != "" {
		t.Errorf("recorded device %+v", r)
	}

	// Beside a GPU: the channel's ID comes after the GPU's.
	ids, err = w.WriteClaim(ClaimSpec{Claim: claim, Devices: []ClaimDevice{dev(0, nvidiaGPU(0), nil)}, Channels: []Channel{ch}})
	if err != nil || len(ids) != 2 || !strings.HasSuffix(ids[1][0], "-1-imex-channel-7") {
		t.Errorf("ids %v, %v", ids, err)
	}
	bad := ch
	bad.Node = nil
	if _, err := w.WriteClaim(ClaimSpec{Claim: claim, Channels: []Channel{bad}}); err == nil || !strings.Contains(err.Error(), "no character device node") {
		t.Errorf("a channel without its node: %v", err)
	}
}
