package cdi

import (
	"slices"
	"strconv"
	"strings"
)

// A container gets the CDI IDs of the claim's devices it uses: all of them
// when it names the claim, only one request's when it names that request
// (the kubelet filters the prepared devices by request name). That is the
// everyday case of a pod-group claim, one request per worker
// (docs/training.md), and of a pod whose containers split a claim.
//
// The variables that list a container's GPUs (NVIDIA_VISIBLE_DEVICES, the
// MPS and NCCL devices' CUDA_VISIBLE_DEVICES) cannot be merged by the
// runtime: CDI applies the edits of the IDs in order and a later value of a
// variable replaces an earlier one. So a claim of several requests gets
// its claim-level devices (common, MPS, NCCL) once per request, each
// listing that request's GPUs only, and its devices name their request's;
// a container naming one request then sees exactly its GPUs, never a GPU
// another container holds (which the NVIDIA runtime's legacy mode would
// inject, and which would make CUDA_VISIBLE_DEVICES name a GPU CUDA cannot
// find).
//
// The claim-wide ones stay in the spec under their old names, listing all
// the claim's GPUs: WholeClaimIDs names them, and the driver hands them to
// the kubelet as one more device entry under WholeClaimRequest, which only
// a container naming the whole claim receives, last, so their values win.
// A claim of one request has no per-request devices: its spec is as
// before.

// WholeClaimRequest is the request name of the prepared-device entry that
// carries WholeClaimIDs. It is not a DNS label, so no request of a claim
// has it: the kubelet gives the entry only to containers that name the
// claim, not one of its requests.
const WholeClaimRequest = "tessera.whole-claim"

// scopeSuffix is the name suffix of request k's claim-level devices ("" in
// a claim of one request: the claim-wide devices serve it).
func scopeSuffix(k int) string { return "-r" + strconv.Itoa(k) }

// requestScopes maps each device of devs to its request's suffix: "" when
// the claim has one request, else scopeSuffix of the request's index in
// order of first appearance.
func requestScopes(devs []ClaimDevice) []string {
	order := map[string]int{}
	for _, d := range devs {
		if _, ok := order[d.Request]; !ok {
			order[d.Request] = len(order)
		}
	}
	out := make([]string, len(devs))
	if len(order) < 2 {
		return out
	}
	for i, d := range devs {
		out[i] = scopeSuffix(order[d.Request])
	}
	return out
}

// scopedDevices groups devs by suffix (requestScopes), in order of first
// appearance: the device lists each per-request claim-level device is
// built from. Empty for a claim of one request.
func scopedDevices(devs []ClaimDevice) (suffixes []string, groups map[string][]ClaimDevice) {
	scopes := requestScopes(devs)
	groups = map[string][]ClaimDevice{}
	for i, s := range scopes {
		if s == "" {
			continue
		}
		if _, ok := groups[s]; !ok {
			suffixes = append(suffixes, s)
		}
		groups[s] = append(groups[s], devs[i])
	}
	return suffixes, groups
}

// WholeClaimIDs are the IDs a container naming the whole claim must get
// after its devices' IDs, given those (per device, as WriteClaim returned
// them or the checkpoint recorded them): the claim-wide claim-level devices
// their per-request ones stand in for, in order of first appearance. Nil
// when no device names a per-request one (a claim of one request, or one
// prepared before per-request devices existed, whose IDs name the
// claim-wide ones already).
func WholeClaimIDs(claimUID string, ids [][]string) []string {
	prefix := qualified(claimUID + "-")
	var out []string
	scoped := false
	for _, list := range ids {
		for _, id := range list {
			rest, ok := strings.CutPrefix(id, prefix)
			if !ok || !isClaimLevel(rest) {
				continue
			}
			base, suffix := splitScope(rest)
			if suffix == "" {
				continue
			}
			scoped = true
			if w := qualified(claimUID + "-" + base); !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	if !scoped {
		return nil
	}
	return out
}

// isClaimLevel reports whether name (a device name less "<uid>-") is a
// claim-level device (a vendor's common device, or a ClaimLevel's), never
// an allocated device, whose name starts with its index.
func isClaimLevel(name string) bool {
	return name != "" && (name[0] < '0' || name[0] > '9')
}

// splitScope splits a claim-level device name into its claim-wide name and
// its per-request suffix ("" for a claim-wide one).
func splitScope(name string) (base, suffix string) {
	i := strings.LastIndex(name, "-r")
	if i < 0 {
		return name, ""
	}
	if _, err := strconv.Atoi(name[i+2:]); err != nil || i+2 == len(name) {
		return name, ""
	}
	return name[:i], name[i:]
}
