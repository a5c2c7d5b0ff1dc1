package e2e

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// amdDynamicNode is the MI300X node that sets compute partition modes per
// claim (--partitioning=dynamic).
const amdDynamicNode = "gpu-mi300x-dynamic"

// checkAMDModes: the two CPX pods got CPX partitions of the dynamic MI300X
// node, and while they run the hardware has their GPUs in CPX; the DPX
// pod got a half of another GPU, in DPX.
func checkAMDModes(t *testing.T, pods map[string]got) {
	isMode := func(m string) func(resourceapi.Device) bool {
		return func(d resourceapi.Device) bool { return str(d, "type") == "partition" && str(d, "profile") == m }
	}
	a, b, half := pods["cpx-a"], pods["cpx-b"], pods["dpx-half"]
	expectDevices(t, a, 1, isMode("CPX"))
	expectDevices(t, b, 1, isMode("CPX"))
	expectDevices(t, half, 1, isMode("DPX"))
	for name, g := range pods {
		if g.placement.Node != amdDynamicNode {
			t.Errorf("pod %s ran on %s, want %s", name, g.placement.Node, amdDynamicNode)
		}
	}
	dpxGPU := str(half.devices[0], "parentUUID")
	for _, g := range []got{a, b} {
		if str(g.devices[0], "parentUUID") == dpxGPU {
			t.Errorf("a CPX partition and the DPX half on one GPU %s", dpxGPU)
		}
	}
	want := map[string]string{str(a.devices[0], "parentUUID"): "CPX", str(b.devices[0], "parentUUID"): "CPX", dpxGPU: "DPX"}
	st := simState(t, amdDynamicNode)
	for gpu, mode := range want {
		n := 0
		for _, p := range st.partitions {
			if p.gpu != gpu {
				continue
			}
			n++
			if p.profile != mode {
				t.Errorf("GPU %s has a %s partition, want it in %s", gpu, p.profile, mode)
			}
		}
		if n == 0 {
			t.Errorf("GPU %s has no partitions while a pod holds one of mode %s", gpu, mode)
		}
	}
}

// checkAMDRest: once the pods are gone every GPU of the node is whole
// again (SPX: no partitions).
func checkAMDRest(t *testing.T) {
	st := simState(t, amdDynamicNode)
	if len(st.partitions) != 0 {
		t.Errorf("partitions left on %s: %+v", amdDynamicNode, st.partitions)
	}
	for gpu, on := range st.migOn {
		if on {
			t.Errorf("GPU %s on %s left in a multi-partition mode", gpu, amdDynamicNode)
		}
	}
}
