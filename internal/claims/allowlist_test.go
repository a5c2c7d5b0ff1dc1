package claims

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestContainerEditsAllowlist: whatever claim the agent prepares, on any
// node, the edits of the CDI spec it writes, and of everything the IDs it
// returns resolve to, are on the allowlist of docs/security.md, and every
// row of that list is needed by some claim. It prepares every device kind
// (NVIDIA GPU, static and dynamic MIG, AMD GPU and compute partition) with
// every config (none, each sharing strategy and setting, from the claim
// and from the class), capacity shares, claims of several devices and
// vendors, and claims beside a vendor spec; each spec is checked as
// written at prepare and as rewritten when it has gone.
func TestContainerEditsAllowlist(t *testing.T) {
	rows := readAllowlist(t)
	a := &allowCheck{rows: rows}
	for _, n := range allowNodes {
		t.Run(n.name, func(t *testing.T) { a.node(t, n) })
	}
	if t.Failed() {
		return // dead rows mean nothing when a case did not run
	}
	for _, r := range rows {
		if r.hits == 0 {
			t.Errorf("%s: %s allows nothing any claim gets: drop the row, or add the case that needs it", allowlistDoc, r)
		}
	}
	for _, k := range deviceKinds {
		if a.kinds[k] == 0 {
			t.Errorf("no claim held a device of kind %s", k)
		}
	}
}

// Device kinds, as pick sorts a node's devices.
const (
	kindNVIDIA     = "NVIDIA GPU"
	kindStaticMIG  = "static MIG instance"
	kindDynamicMIG = "dynamic MIG instance"
	kindAMD        = "AMD GPU"
	kindXCP        = "AMD compute partition"
)

var deviceKinds = []string{kindNVIDIA, kindStaticMIG, kindDynamicMIG, kindAMD, kindXCP}

func kindOf(e publish.Entry) string {
	switch {
	case e.GPU.Vendor == inventory.VendorAMD && e.Partition != nil:
		return kindXCP
	case e.GPU.Vendor == inventory.VendorAMD:
		return kindAMD
	case e.Carve != nil:
		return kindDynamicMIG
	case e.Partition != nil:
		return kindStaticMIG
	}
	return kindNVIDIA
}

// allowNode is one simulated node and what is prepared on it: one device
// of each kind and model (or partition profile) it has, the first of each
// kind in full with each config, then the multi-device claims.
type allowNode struct {
	name, profile string
	// full are the kinds whose first device gets every config; the
	// node's other devices get the first config only (another node
	// covers their kind in full).
	full         []string
	partitioning publish.Partitioning
	sharing      publish.Sharing
	vendorSpec   vendorNaming // "" for none
	configs      []allowConfig
	multi        []multiClaim
	// channel: an IMEX channel of the node's domain is prepared too.
	channel bool
	// passthrough: the node's agent passes GPUs through (the multi
	// claims with a class ask them of it).
	passthrough bool
}

// allowConfig is how a single-device claim is configured.
type allowConfig struct {
	name string
	// sharing is the config's "sharing" JSON ("" for a config without it);
	// DEV stands for the device's name. The config's kind is the device
	// type's. noConfig: the claim has no config at all.
	sharing  string
	noConfig bool
	class    bool // the config comes from the class, for every request
	// share: the claim gets a capacity share of the device (memory, and
	// compute units when cu > 0); "all" is the device's whole memory.
	share string
	cu    int64
	// refused lists the device kinds that must refuse it.
	refused []string
}

var (
	amdKinds = []string{kindAMD, kindXCP}
	// Partitions take no interval of their own, AMD GPUs only Default.
	intervalRefused = []string{kindStaticMIG, kindDynamicMIG, kindAMD, kindXCP}
)

const mpsThreads = `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50}}`

// sharingConfigs are every sharing setting of api/gpu/v1alpha1.
var sharingConfigs = []allowConfig{
	{name: "no config", noConfig: true},
	{name: "config without sharing"},
	{name: "time-slicing, no interval", sharing: `{"strategy":"TimeSlicing"}`},
	{name: "time-slicing Default", sharing: `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Default"}}`},
	{name: "time-slicing Short", sharing: `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Short"}}`, refused: intervalRefused},
	{name: "time-slicing Medium", sharing: `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Medium"}}`, refused: intervalRefused},
	{name: "time-slicing Long", sharing: `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}`, refused: intervalRefused},
	{name: "MPS without limits", sharing: `{"strategy":"MPS","mps":{}}`, refused: amdKinds},
	{name: "MPS threads", sharing: mpsThreads, refused: amdKinds},
	{name: "MPS pinned memory", sharing: `{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"1Gi"}}`, refused: amdKinds},
	{name: "MPS per-device pinned memory", sharing: `{"strategy":"MPS","mps":{"defaultPerDevicePinnedMemoryLimit":{"DEV":"2Gi"}}}`, refused: amdKinds},
	{name: "MPS every setting", sharing: `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":25,"defaultPinnedDeviceMemoryLimit":"1Gi","defaultPerDevicePinnedMemoryLimit":{"DEV":"3Gi"}}}`, refused: amdKinds},
	{name: "MPS from the class", sharing: mpsThreads, class: true, refused: amdKinds},
	{name: "time-slicing from the class", sharing: `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Default"}}`, class: true},
}

// shareConfigs are what a claim can get of a node with --sharing=capacity.
var shareConfigs = []allowConfig{
	{name: "memory share", share: "4Gi", noConfig: true},
	{name: "memory and compute share", share: "4Gi", cu: 8, noConfig: true},
	{name: "share with a config without sharing", share: "3Gi"},
	{name: "share with a sharing config", share: "3Gi", sharing: mpsThreads, refused: deviceKinds},
	{name: "the whole device", share: "all", noConfig: true},
	{name: "the whole device under MPS", share: "all", sharing: mpsThreads, refused: amdKinds},
}

// multiClaim is a claim of several devices, by name.
type multiClaim struct {
	name    string
	devices []string
	sharing string // "" for no config
	kind    string // the config's kind
	// ncclTopo: the claim asks for an NCCL topology file (a config of
	// its own, GpuConfig, for request "gpu").
	ncclTopo bool
	// class is the DeviceClass its request names ("" for none).
	class string
	// admin: every device is allocated for admin access (a monitor's
	// claim): its spec must hold a holder's edits and no more.
	admin bool
}

const (
	gpuConfig       = "GpuConfig"
	partitionConfig = "PartitionConfig"
)

var allowNodes = []allowNode{
	{name: "mixed-inference", profile: "mixed-inference", full: []string{kindNVIDIA, kindAMD}, configs: sharingConfigs, multi: []multiClaim{
		{name: "two A100s under MPS", devices: []string{"gpu-0", "gpu-1"}, kind: gpuConfig,
			sharing: `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":40,"defaultPinnedDeviceMemoryLimit":"2Gi","defaultPerDevicePinnedMemoryLimit":{"gpu-1":"4Gi"}}}`},
		{name: "an A100 and the MI210", devices: []string{"gpu-0", "gpu-4"}},
		{name: "two T4s time-sliced", devices: []string{"gpu-2", "gpu-3"}, kind: gpuConfig, sharing: `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}`},
		{name: "every GPU", devices: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"}},
		{name: "two A100s with an NCCL topology file", devices: []string{"gpu-1", "gpu-0"}, ncclTopo: true},
		{name: "every GPU watched with admin access", devices: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"}, admin: true},
	}},
	{name: "mi300x-8, NCCL topology file", profile: "mi300x-8", configs: sharingConfigs[:1], multi: []multiClaim{
		{name: "three MI300X with an NCCL topology file", devices: []string{"gpu-5", "gpu-0", "gpu-2"}, ncclTopo: true},
	}},
	{name: "dgx-h100-mig, static MIG", profile: "dgx-h100-mig", full: []string{kindStaticMIG}, configs: sharingConfigs, multi: []multiClaim{
		{name: "a GPU and a MIG instance", devices: []string{"gpu-0", "gpu-7-mig-3g-40gb-4"}},
		{name: "a GPU and a MIG instance watched with admin access", devices: []string{"gpu-0", "gpu-7-mig-3g-40gb-4"}, admin: true},
		{name: "two MIG instances under MPS", devices: []string{"gpu-6-mig-1g-10gb-0", "gpu-6-mig-1g-10gb-1"}, kind: partitionConfig,
			sharing: `{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"1Gi"}}`},
	}},
	{name: "dgx-h100, dynamic MIG", profile: "dgx-h100", partitioning: publish.Dynamic, full: []string{kindDynamicMIG}, configs: sharingConfigs, multi: []multiClaim{
		{name: "two placements carved on one GPU", devices: []string{"gpu-7-mig-1g-10gb-6", "gpu-7-mig-3g-40gb-0"}},
	}},
	{name: "MI300X in CPX mode", profile: "testdata/mi300x-cpx.yaml", full: []string{kindXCP}, configs: sharingConfigs, multi: []multiClaim{
		{name: "two compute partitions and a GPU", devices: []string{"gpu-0-xcp-cpx-0", "gpu-0-xcp-cpx-5", "gpu-1"}},
	}},
	{name: "gb200-nvl72-tray, an IMEX channel", profile: "gb200-nvl72-tray", full: []string{kindNVIDIA}, configs: sharingConfigs[:1], channel: true},
	{name: "l4-4, capacity shares", profile: "l4-4", sharing: publish.SharingCapacity, full: []string{kindNVIDIA}, configs: shareConfigs},
	{name: "mixed-inference, capacity shares", profile: "mixed-inference", sharing: publish.SharingCapacity, full: []string{kindAMD}, configs: shareConfigs},
	{name: "dgx-h100-mig, capacity shares", profile: "dgx-h100-mig", sharing: publish.SharingCapacity, full: []string{kindStaticMIG}, configs: shareConfigs},
	{name: "mixed-inference, vendor spec by index", profile: "mixed-inference", vendorSpec: byIndex, full: []string{kindNVIDIA}, configs: sharingConfigs[:9], multi: []multiClaim{
		{name: "an A100 and the MI210", devices: []string{"gpu-0", "gpu-4"}},
	}},
	{name: "dgx-h100-mig, vendor spec by UUID", profile: "dgx-h100-mig", vendorSpec: byUUID, full: []string{kindNVIDIA, kindStaticMIG}, configs: sharingConfigs[:9], multi: []multiClaim{
		{name: "a GPU and a MIG instance", devices: []string{"gpu-0", "gpu-7-mig-3g-40gb-4"}},
	}},
	{name: "dgx-h100-mig, vendor spec by index", profile: "dgx-h100-mig", vendorSpec: byIndex, full: []string{kindStaticMIG}, configs: sharingConfigs[:2]},
	{name: "dgx-h100 dynamic, vendor spec by index", profile: "dgx-h100", partitioning: publish.Dynamic, vendorSpec: byIndex, full: []string{kindNVIDIA}, configs: sharingConfigs[:2]},
	{name: "passthrough", profile: "mixed-inference", passthrough: true, configs: sharingConfigs[:1], vendorSpec: byIndex, multi: []multiClaim{
		{name: "an A100 passed through", devices: []string{"gpu-1"}, class: names.VFIOClass},
		{name: "an A100 and the MI210 passed through", devices: []string{"gpu-0", "gpu-4"}, class: names.VFIOClass},
	}},
}

// allowCheck is the state of one run over the table.
type allowCheck struct {
	rows  []*allowRow
	kinds map[string]int
	n     int // claims prepared, for unique names
}

func (a *allowCheck) node(t *testing.T, n allowNode) {
	e := sharingEnv(t, n.profile)
	e.partitioning, e.sharing, e.passthrough = n.partitioning, n.sharing, n.passthrough
	if n.channel {
		e.imex = (&imexNode{ready: true}).config()
	}
	if n.vendorSpec != "" {
		e.vendorSpecDirs = []string{e.vendorDir()}
	}
	m, res := e.start(nil)
	if n.vendorSpec != "" {
		e.writeVendorSpec(n.vendorSpec)
	}
	for _, p := range pick(res) {
		entry := res.Devices[p.device]
		kind, dev := kindOf(entry), p.device
		configs := n.configs
		if !p.first || !slices.Contains(n.full, kind) {
			configs = configs[:1]
		}
		for _, c := range configs {
			claim := a.single(dev, entry, c)
			refused := slices.Contains(c.refused, kind)
			a.prepare(t, e, m, fmt.Sprintf("%s, %s, %s", kind, dev, c.name), claim, refused, kind)
		}
	}
	for _, mc := range n.multi {
		claim := a.claim(mc.devices...)
		if mc.class != "" {
			claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: mc.class}}}
		}
		if mc.sharing != "" {
			withConfig(claim, mc.kind, mc.sharing, false)
		}
		if mc.ncclTopo {
			withNCCLTopo(claim)
		}
		if mc.admin {
			yes := true
			for i := range claim.Status.Allocation.Devices.Results {
				claim.Status.Allocation.Devices.Results[i].AdminAccess = &yes
			}
		}
		a.prepare(t, e, m, mc.name, claim, false, "")
	}
	if n.channel {
		a.prepare(t, e, m, "an IMEX channel", channelClaim("imex", trayDomain, 9), false, "")
	}
}

// picked is a device to prepare; first: the first of its kind, which
// gets every config (the others, of other models or partition profiles,
// only the first: their edits differ by numbers only).
type picked struct {
	device string
	first  bool
}

// pick is one device of each kind and model, or kind and partition
// profile, of the node, in name order.
func pick(res *publish.Result) []picked {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range res.Devices {
			if !yield(n) {
				return
			}
		}
	})
	seen := map[string]bool{}
	var out []picked
	for _, n := range names {
		e := res.Devices[n]
		first := !seen[kindOf(e)]
		seen[kindOf(e)] = true
		key := kindOf(e) + "/" + e.GPU.Model
		switch {
		case e.Carve != nil:
			key += "/" + e.Carve.Profile
		case e.Partition != nil:
			key += "/" + e.Partition.Profile
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, picked{n, first})
		}
	}
	return out
}

// claim is a claim allocated devices of the node, under a fresh name.
func (a *allowCheck) claim(devices ...string) *resourceapi.ResourceClaim {
	a.n++
	return allocated("allow-"+strconv.Itoa(a.n), devices...)
}

// single is the claim of one device configured as c says.
func (a *allowCheck) single(dev string, e publish.Entry, c allowConfig) *resourceapi.ResourceClaim {
	claim := a.claim(dev)
	if c.share != "" {
		r := &claim.Status.Allocation.Devices.Results[0]
		id := types.UID("share-" + claim.Name)
		r.ShareID = &id
		var mem resource.Quantity
		if c.share == "all" {
			mem = *resource.NewQuantity(sharedMemory(e), resource.BinarySI)
		} else {
			mem = resource.MustParse(c.share)
		}
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{publish.CapMemory: mem}
		if c.cu > 0 {
			r.ConsumedCapacity[publish.CapComputeUnits] = *resource.NewQuantity(c.cu, resource.DecimalSI)
		}
	}
	if c.noConfig {
		return claim
	}
	kind := gpuConfig
	if e.Partition != nil || e.Carve != nil {
		kind = partitionConfig
	}
	withConfig(claim, kind, strings.ReplaceAll(c.sharing, "DEV", dev), c.class)
	return claim
}

// withNCCLTopo gives claim a GpuConfig for request "gpu" that asks for
// an NCCL topology file.
func withNCCLTopo(claim *resourceapi.ResourceClaim) {
	claim.Status.Allocation.Devices.Config = append(claim.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":true}}`)},
		}},
	})
}

// withConfig gives claim one opaque config of kind with sharing ("" for
// none), from the claim for request "gpu" or from the class for all.
func withConfig(claim *resourceapi.ResourceClaim, kind, sharing string, class bool) {
	params := `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"` + kind + `"`
	if sharing != "" {
		params += `,"sharing":` + sharing
	}
	params += "}"
	cfg := resourceapi.DeviceAllocationConfiguration{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(params)},
		}},
	}
	if class {
		cfg.Source, cfg.Requests = resourceapi.AllocationConfigSourceClass, nil
	}
	claim.Status.Allocation.Devices.Config = append(claim.Status.Allocation.Devices.Config, cfg)
}

// prepare prepares claim, checks what it got, has its spec rewritten and
// checks again, and unprepares it; a claim that must be refused must leave
// no spec.
func (a *allowCheck) prepare(t *testing.T, e *env, m *Manager, name string, claim *resourceapi.ResourceClaim, refused bool, kind string) {
	t.Helper()
	ctx := ctxFor(t)
	ref := cdi.ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	what := fmt.Sprintf("%s: claim %s/%s", name, ref.Namespace, ref.Name)
	devs, err := m.Prepare(ctx, claim)
	if refused {
		if !errors.Is(err, ErrConfigRejected) || e.hasSpec(ref.UID) {
			t.Errorf("%s: prepare %v, spec written %v; want the config refused and no spec", what, err, e.hasSpec(ref.UID))
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if kind != "" {
		if a.kinds == nil {
			a.kinds = map[string]int{}
		}
		a.kinds[kind]++
	}
	b := e.bindingOf(t, m, ref.UID)
	a.check(t, e, m, what+" (at prepare)", ref, devs, b)
	// A reboot clears the spec directory; the next prepare rewrites it
	// from the checkpoint.
	if err := os.Remove(m.cfg.CDI.SpecPath(ref.UID)); err != nil {
		t.Fatal(err)
	}
	again, err := m.Prepare(ctx, claim)
	if err != nil {
		t.Errorf("%s: prepare after the spec went: %v", what, err)
	} else {
		a.check(t, e, m, what+" (rewritten)", ref, again, b)
	}
	if err := m.Unprepare(ctx, ref.UID, ref.Namespace, ref.Name); err != nil {
		t.Fatalf("%s: unprepare: %v", what, err)
	}
}

// bindingOf is what the placeholders of the claim's edits may stand for:
// its devices as the node has them now (a dynamic MIG instance exists only
// once prepare carved it).
func (e *env) bindingOf(t *testing.T, m *Manager, uid string) *binding {
	t.Helper()
	inv, err := e.sim.Discover(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	b := &binding{uid: uid, minors: map[string]bool{}, caps: map[string]bool{}, cards: map[string]bool{}, renders: map[string]bool{},
		uuids: map[string]bool{}, amdUUIDs: map[string]bool{}, channels: map[string]bool{}, groups: map[string]bool{}, devRoot: e.sim.DevRoot(), mpsRoot: e.mpsRoot(), cdiDir: e.cdiDir()}
	num := strconv.Itoa
	for _, d := range m.Prepared()[uid].Devices {
		if ch, ok := channelpool.ChannelOf(d.Device); ok {
			b.channels[num(ch)] = true
			continue
		}
		if d.VFIO != nil {
			// Passed through: none of its vendor's nodes (its driver let
			// it go, and the node no longer lists it), its group's.
			b.groups[num(d.VFIO.Group)] = true
			continue
		}
		g, p := findDevice(t, inv, d)
		switch {
		case g.Vendor == inventory.VendorNVIDIA && p == nil:
			b.minors[num(g.Minor)] = true
			b.uuids[g.UUID] = true
		case g.Vendor == inventory.VendorNVIDIA:
			b.minors[num(g.Minor)] = true
			b.uuids[p.UUID] = true
			gi, ci, err := nvidia.MIGCapMinors(g.Minor, p.GPUInstanceID, p.ComputeInstanceID)
			if err != nil {
				t.Fatal(err)
			}
			b.caps[num(gi)], b.caps[num(ci)] = true, true
		case p == nil:
			b.cards[num(g.Minor)], b.renders[num(g.RenderMinor)] = true, true
			b.amdUUIDs["GPU-"+g.UUID] = true
		default:
			b.cards[num(p.Minor)], b.renders[num(p.RenderMinor)] = true, true
		}
	}
	return b
}

// findDevice is the GPU, and partition, a prepared device record names.
func findDevice(t *testing.T, inv *inventory.Node, d checkpoint.Device) (*inventory.GPU, *inventory.Partition) {
	t.Helper()
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if g.UUID != d.GPUUUID {
			continue
		}
		if d.PartitionUUID == "" {
			return g, nil
		}
		for j := range g.Partitions {
			if g.Partitions[j].UUID == d.PartitionUUID {
				return g, &g.Partitions[j]
			}
		}
	}
	t.Fatalf("device %s (GPU %s, partition %q) is not on the node", d.Device, d.GPUUUID, d.PartitionUUID)
	return nil, nil
}

// check holds the claim's spec file and what each of its devices' IDs
// resolve to against the allowlist.
func (a *allowCheck) check(t *testing.T, e *env, m *Manager, what string, ref cdi.ClaimRef, devs []Device, b *binding) {
	t.Helper()
	ms := matchers(a.rows, b)
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(append(slices.Clone(e.vendorSpecDirs), e.cdiDir())...), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("%s: CDI cache: %v", what, err)
	}
	for path, errs := range cache.GetErrors() {
		t.Errorf("%s: CDI spec %s: %v", what, path, errs)
	}
	specPath := filepath.Join(e.cdiDir(), "k8s.gpu.tessera.dev-claim_"+ref.UID+".json")
	var spec *cdiapi.Spec
	for _, s := range cache.GetVendorSpecs(cdi.Vendor) {
		if s.GetPath() == specPath {
			spec = s
		}
	}
	if spec == nil {
		t.Errorf("%s: no spec %s", what, specPath)
		return
	}
	// The spec as written: every edit it holds, whether or not an ID
	// names its device.
	for _, ed := range cdiEdits(spec.ContainerEdits) {
		t.Errorf("%s, spec %s: %s is an edit of the whole spec; %s allows edits of devices only", what, specPath, ed, allowlistDoc)
	}
	for _, d := range spec.Devices {
		where := fmt.Sprintf("CDI device %s", d.Name)
		if dra := d.Annotations["gpu.tessera.dev/device"]; dra != "" {
			where += " (DRA device " + dra + ")"
		}
		for _, ed := range cdiEdits(d.ContainerEdits) {
			a.allowed(t, ms, b, what+", "+where, ed, nil)
		}
	}
	// What a container of each device gets: the IDs, resolved and
	// injected as a runtime does.
	for _, d := range devs {
		where := fmt.Sprintf("DRA device %s, IDs %v", d.Name, d.CDIDeviceIDs)
		vendor := a.vendorEdits(t, cache, e, what+", "+where, ref, d, m.Prepared()[ref.UID])
		oci := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
		if _, err := cache.InjectDevices(oci, d.CDIDeviceIDs...); err != nil {
			t.Errorf("%s, %s: inject: %v", what, where, err)
			continue
		}
		for _, ed := range ociEdits(oci) {
			a.allowed(t, ms, b, what+", "+where+", injected", ed, vendor)
		}
	}
}

// allowed fails unless a row allows ed, or ed is one of the vendor spec's
// edits the device's IDs brought.
func (a *allowCheck) allowed(t *testing.T, ms []rowMatcher, b *binding, where string, ed edit, vendor map[string]bool) {
	t.Helper()
	if r := allow(ms, ed, b); r != nil {
		r.hits++
		return
	}
	if vendor[ed.key()] && ed.bad == "" {
		return
	}
	why := ""
	if ed.bad != "" {
		why = " (" + ed.bad + ")"
	}
	t.Errorf("%s: %s%s is not on the allowlist in %s", where, ed, why, allowlistDoc)
}

// vendorEdits checks the IDs of claim device d: each is the claim's own or
// names, in the vendor spec, the same GPU or MIG instance. It returns the
// edits (by kind and container side) those vendor devices bring, with
// their spec's.
func (a *allowCheck) vendorEdits(t *testing.T, cache *cdiapi.Cache, e *env, where string, ref cdi.ClaimRef, d Device, c checkpoint.Claim) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	vendorIDs := 0
	for _, id := range d.CDIDeviceIDs {
		v, cls, name, err := parser.ParseQualifiedName(id)
		if err != nil {
			t.Errorf("%s: ID %q: %v", where, id, err)
			continue
		}
		dev := cache.GetDevice(id)
		if dev == nil {
			t.Errorf("%s: ID %q resolves to no CDI device", where, id)
			continue
		}
		kind := v + "/" + cls
		if kind == cdi.Kind {
			if !strings.HasPrefix(name, ref.UID+"-") || filepath.Base(dev.GetSpec().GetPath()) != "k8s.gpu.tessera.dev-claim_"+ref.UID+".json" {
				t.Errorf("%s: ID %q is not a device of the claim's own spec", where, id)
			}
			continue
		}
		row := a.vendorRow(kind)
		if row == nil {
			t.Errorf("%s: ID %q is of kind %s, which no row of %s allows", where, id, kind, allowlistDoc)
			continue
		}
		vendorIDs++
		if !e.vendorDeviceIs(t, dev, c, d) {
			t.Errorf("%s: ID %q names vendor device %s, which is not this device's", where, id, dev.Name)
			continue
		}
		row.hits++
		for _, ed := range append(cdiEdits(dev.GetSpec().ContainerEdits), cdiEdits(dev.ContainerEdits)...) {
			out[ed.key()] = true
		}
	}
	if vendorIDs > 1 {
		t.Errorf("%s: %d vendor device IDs, want at most one", where, vendorIDs)
	}
	return out
}

func (a *allowCheck) vendorRow(kind string) *allowRow {
	for _, r := range a.rows {
		if r.kind == rowVendor && r.vendorKind == kind {
			return r
		}
	}
	return nil
}

// vendorDeviceIs reports whether vendor device dev names claim device d:
// by its UUID, or by exactly its GPU and MIG capability nodes.
func (e *env) vendorDeviceIs(t *testing.T, dev *cdiapi.Device, c checkpoint.Claim, d Device) bool {
	t.Helper()
	inv, err := e.sim.Discover(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	var rec *checkpoint.Device
	for i := range c.Devices {
		if c.Devices[i].Device == d.Name {
			rec = &c.Devices[i]
		}
	}
	if rec == nil {
		t.Fatalf("claim %s/%s has no device %s", c.Namespace, c.Name, d.Name)
	}
	g, p := findDevice(t, inv, *rec)
	if g.Vendor != inventory.VendorNVIDIA {
		return false
	}
	uuid, want := g.UUID, []string{"/dev/nvidia" + strconv.Itoa(g.Minor)}
	if p != nil {
		uuid = p.UUID
		gi, ci, err := nvidia.MIGCapMinors(g.Minor, p.GPUInstanceID, p.ComputeInstanceID)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, capPath(gi), capPath(ci))
	}
	if dev.Name == uuid {
		return true
	}
	var got []string
	for _, n := range dev.ContainerEdits.DeviceNodes {
		if strings.HasPrefix(n.Path, "/dev/nvidia-caps/") || strings.TrimRight(n.Path, "0123456789") == "/dev/nvidia" {
			got = append(got, n.Path)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	return slices.Equal(got, want)
}

func capPath(minor int) string { return "/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(minor) }

// vendorNaming is how the vendor spec names its devices, as nvidia-ctk's
// --device-name-strategy does.
type vendorNaming string

const (
	byIndex vendorNaming = "index" // "0", and "0:1" for a GPU's MIG instance
	byUUID  vendorNaming = "uuid"
)

func (e *env) vendorDir() string { return filepath.Join(e.dir, "vendor-cdi") }

// writeVendorSpec writes the node's nvidia.com/gpu spec as nvidia-ctk
// would, for the GPUs and MIG instances the node has now: each device with
// its nodes and a marker variable of its own, an "all" device, and the
// spec's own libraries, control nodes and hooks.
func (e *env) writeVendorSpec(naming vendorNaming) {
	e.t.Helper()
	inv, err := e.sim.Discover(ctxFor(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	node := func(rel string) *cdispec.DeviceNode {
		n := &cdispec.DeviceNode{Path: "/dev/" + rel, HostPath: filepath.Join(e.sim.DevRoot(), rel)}
		if major, minor, ok := e.sim.DeviceNumbers(rel); ok {
			n.Type, n.Major, n.Minor = "c", major, minor
		}
		return n
	}
	marker := func(name string) string {
		return "VENDOR_DEVICE_" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, name) + "=1"
	}
	spec := cdispec.Spec{
		Version: "0.6.0", Kind: nvidia.CDIKind,
		ContainerEdits: cdispec.ContainerEdits{
			Env:         []string{"NVIDIA_VISIBLE_DEVICES=void"},
			DeviceNodes: []*cdispec.DeviceNode{node("nvidiactl"), node("nvidia-uvm")},
			Mounts: []*cdispec.Mount{{HostPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", ContainerPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
				Options: []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}}},
			Hooks: []*cdispec.Hook{{HookName: "createContainer", Path: "/usr/bin/nvidia-cdi-hook", Args: []string{"nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu"}}},
		},
	}
	all := cdispec.Device{Name: "all", ContainerEdits: cdispec.ContainerEdits{Env: []string{marker("all")}}}
	for _, g := range inv.GPUs {
		if g.Vendor != inventory.VendorNVIDIA {
			continue
		}
		gpuNode := "nvidia" + strconv.Itoa(g.Minor)
		name := strconv.Itoa(g.Minor)
		if naming == byUUID {
			name = g.UUID
		}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: name, ContainerEdits: cdispec.ContainerEdits{
			Env: []string{marker(name)}, DeviceNodes: []*cdispec.DeviceNode{node(gpuNode)},
		}})
		all.ContainerEdits.DeviceNodes = append(all.ContainerEdits.DeviceNodes, node(gpuNode))
		for i, p := range g.Partitions {
			gi, ci, err := nvidia.MIGCapMinors(g.Minor, p.GPUInstanceID, p.ComputeInstanceID)
			if err != nil {
				e.t.Fatal(err)
			}
			name := strconv.Itoa(g.Minor) + ":" + strconv.Itoa(i)
			if naming == byUUID {
				name = p.UUID
			}
			caps := []*cdispec.DeviceNode{node(gpuNode), node(strings.TrimPrefix(capPath(gi), "/dev/")), node(strings.TrimPrefix(capPath(ci), "/dev/"))}
			spec.Devices = append(spec.Devices, cdispec.Device{Name: name, ContainerEdits: cdispec.ContainerEdits{Env: []string{marker(name)}, DeviceNodes: caps}})
		}
	}
	spec.Devices = append(spec.Devices, all)
	data, err := json.Marshal(spec)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.MkdirAll(e.vendorDir(), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.vendorDir(), "nvidia.json"), data, 0o644); err != nil {
		e.t.Fatal(err)
	}
}
