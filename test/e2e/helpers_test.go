package e2e

import (
	"context"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
)

func namespace(t *testing.T) string {
	t.Helper()
	return e2eutil.Namespace(t, client, "")
}

// nodeSlices lists the ResourceSlices published for node.
func nodeSlices(t *testing.T, node string) []resourceapi.ResourceSlice {
	t.Helper()
	l, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// device looks a published device up by pool and name.
func device(t *testing.T, pool, name string) resourceapi.Device {
	t.Helper()
	for _, s := range nodeSlices(t, pool) {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("device %s/%s is not published", pool, name)
	return resourceapi.Device{}
}

func str(d resourceapi.Device, attr string) string {
	if a, ok := d.Attributes[resourceapi.QualifiedName(attr)]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func checkpointClaims(t *testing.T, node string) map[string]checkpoint.State {
	t.Helper()
	return e2eutil.CheckpointClaims(t, cluster, node)
}

func specExists(node, uid string) bool { return e2eutil.SpecExists(cluster, node, uid) }

// simPartition is a partition as a node's simulated backend holds it.
type simPartition struct {
	gpu, profile, uuid string
	start              int
	p                  inventory.Partition
}

type simNode struct {
	partitions []simPartition
	migOn      map[string]bool // GPU UUID -> MIG mode, for partitionable GPUs
	// timeSlice is each GPU's compute time-slice interval ("": the default).
	timeSlice map[string]string
}

// simState reads a node's simulated hardware state (the sim backend's
// state file, with its own reader): the partitions that exist and each
// GPU's MIG mode.
func simState(t *testing.T, node string) simNode {
	t.Helper()
	gpus, err := sim.ReadState(simDir(node))
	if err != nil {
		t.Fatal(err)
	}
	out := simNode{migOn: map[string]bool{}, timeSlice: map[string]string{}}
	for _, g := range gpus {
		out.timeSlice[g.UUID] = g.TimeSlice
		if g.PartitioningEnabled != nil {
			out.migOn[g.UUID] = *g.PartitioningEnabled
		}
		for _, p := range g.Partitions {
			out.partitions = append(out.partitions, simPartition{gpu: g.UUID, profile: p.Profile, uuid: p.UUID, start: p.Placement.Start, p: p})
		}
	}
	return out
}

// simDir is a node's simulator state directory (--sim-state-dir).
func simDir(node string) string { return filepath.Join(cluster.NodeDir(node), "sim") }

// carvedUUID finds the partition carved for a dynamically published device
// on its parent GPU: the one the device's name is the name of.
func carvedUUID(t *testing.T, node string, d resourceapi.Device) string {
	t.Helper()
	st := simState(t, node)
	for _, p := range st.partitions {
		if p.gpu != str(d, "parentUUID") {
			continue
		}
		for k := range len(st.timeSlice) {
			if publish.PartitionName(names.GPU(k), p.p) == d.Name {
				return p.uuid
			}
		}
	}
	t.Errorf("device %s on %s: no partition carved for it", d.Name, node)
	return ""
}
