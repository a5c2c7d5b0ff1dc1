package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/channelcases"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// imexWrites sends channelcases' lease and slice writes, as dry runs, as
// the agent of node A, and checks each is admitted or refused by the
// chart's policies as the case says.
func imexWrites(t *testing.T, ctx context.Context, agent kubernetes.Interface) {
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	leases := agent.CoordinationV1().Leases(chartNS)
	lcases := channelcases.LeaseCases()
	// The Role and the policy take a moment: until another node's lease
	// is refused by the policy itself (RBAC is judged first).
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		_, err := leases.Create(ctx, lcases[2].Lease(chartNS, nodeA), dryRun)
		return isPolicyDenial(err), fmt.Sprintf("lease for another node: %v", err)
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range lcases {
		_, err := leases.Create(ctx, c.Lease(chartNS, nodeA), dryRun)
		judgeWrite(t, c.Name, err, c.Message)
	}
	slices := agent.ResourceV1().ResourceSlices()
	for _, c := range channelcases.SliceCases() {
		s, err := channelcases.Slice(nodeA, 64)
		if err != nil {
			t.Fatal(err)
		}
		c.Change(s)
		_, err = slices.Create(ctx, s, dryRun)
		judgeWrite(t, "channel slice: "+c.Name, err, c.Message)
	}
}

// judgeWrite checks a write: admitted where message is "", else refused
// by a policy saying message.
func judgeWrite(t *testing.T, what string, err error, message string) {
	t.Helper()
	if message == "" {
		if err != nil {
			t.Errorf("%s: %v, want admitted", what, err)
		}
		return
	}
	deniedByPolicy(t, what, err, message)
}
