package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestEveryMachinePublishesValidSlices hands what the agent would publish
// for every catalogue machine, in every partitioning and sharing mode, to
// the real API server (server-side dry run): its validation (device and
// counter limits, request policies of shared capacities, taints) is the
// judge, not a copy of its rules.
func TestEveryMachinePublishesValidSlices(t *testing.T) {
	profiles, err := filepath.Glob(filepath.Join(repo, "internal/sim/catalog/*.yaml"))
	if err != nil || len(profiles) == 0 {
		t.Fatalf("no catalogue: %v", err)
	}
	ctx := context.Background()
	for _, p := range profiles {
		profile := strings.TrimSuffix(filepath.Base(p), ".yaml")
		for _, part := range []string{"static", "dynamic"} {
			for _, sharing := range []string{"none", "capacity"} {
				t.Run(fmt.Sprintf("%s/%s/%s", profile, part, sharing), func(t *testing.T) {
					node := "validate-" + profile
					out, err := exec.Command(cluster.PluginBin, "--backend=sim", "--sim-profile="+profile, "--node-name="+node,
						"--sim-state-dir="+t.TempDir(), "--partitioning="+part, "--sharing="+sharing, "--dry-run").Output()
					if err != nil {
						t.Fatalf("dry run: %v", err)
					}
					dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
					n := 0
					for {
						var s resourceapi.ResourceSlice
						if err := dec.Decode(&s); err == io.EOF {
							break
						} else if err != nil {
							t.Fatal(err)
						}
						if s.Name == "" && s.GenerateName == "" {
							continue
						}
						n++
						if _, err := client.ResourceV1().ResourceSlices().Create(ctx, &s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
							t.Errorf("slice %d (%d devices, %d counter sets): %v", n, len(s.Spec.Devices), len(s.Spec.SharedCounters), err)
						}
					}
					if n == 0 {
						t.Fatal("no slices")
					}
				})
			}
		}
	}
}
