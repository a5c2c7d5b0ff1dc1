package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// namespace creates a fresh namespace for one test and waits until pods can
// be admitted into it (its default service account exists).
func namespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-")
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatal(err)
	}
	return name
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

// checkpointClaims reads the claims and their states in a node's checkpoint.
func checkpointClaims(t *testing.T, node string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(cluster.CheckpointPath(node))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Checkpoint struct {
			Claims map[string]struct {
				State string `json:"state"`
			} `json:"claims"`
		} `json:"checkpoint"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("checkpoint of %s: %v", node, err)
	}
	out := map[string]string{}
	for uid, c := range f.Checkpoint.Claims {
		out[uid] = c.State
	}
	return out
}

// specExists reports whether a node has a CDI spec for a claim UID.
func specExists(node, uid string) bool {
	m, _ := filepath.Glob(filepath.Join(cluster.CDIDir(node), "*"+uid+"*"))
	return len(m) > 0
}

// simPartition is a partition as a node's simulated backend holds it.
type simPartition struct {
	gpu, profile, uuid string
	start              int
}

type simNode struct {
	partitions []simPartition
	migOn      map[string]bool // GPU UUID -> MIG mode, for partitionable GPUs
	// timeSlice is each GPU's compute time-slice interval ("": the default).
	timeSlice map[string]string
}

// simState reads a node's simulated hardware state (the sim backend's
// state.json): the partitions that exist and each GPU's MIG mode.
func simState(t *testing.T, node string) simNode {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.NodeDir(node), "sim", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		GPUs []struct {
			UUID       string `json:"uuid"`
			Enabled    *bool  `json:"partitioningEnabled"`
			TimeSlice  string `json:"timeSlice"`
			Partitions []struct {
				Profile   string
				UUID      string
				Placement struct{ Start int }
			} `json:"partitions"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("sim state of %s: %v", node, err)
	}
	out := simNode{migOn: map[string]bool{}, timeSlice: map[string]string{}}
	for _, g := range f.GPUs {
		out.timeSlice[g.UUID] = g.TimeSlice
		if g.Enabled != nil {
			out.migOn[g.UUID] = *g.Enabled
		}
		for _, p := range g.Partitions {
			out.partitions = append(out.partitions, simPartition{gpu: g.UUID, profile: p.Profile, uuid: p.UUID, start: p.Placement.Start})
		}
	}
	return out
}

// carvedUUID finds the partition carved for a dynamically published device
// (named gpu-<n>-mig-<profile>-<start>) on its parent GPU.
func carvedUUID(t *testing.T, node string, d resourceapi.Device) string {
	t.Helper()
	start, err := strconv.Atoi(d.Name[strings.LastIndex(d.Name, "-")+1:])
	if err != nil {
		t.Fatalf("device %s: no placement start in its name", d.Name)
	}
	for _, p := range simState(t, node).partitions {
		if p.gpu == str(d, "parentUUID") && p.profile == str(d, "profile") && p.start == start {
			return p.uuid
		}
	}
	t.Errorf("device %s on %s: no partition carved for it", d.Name, node)
	return ""
}
