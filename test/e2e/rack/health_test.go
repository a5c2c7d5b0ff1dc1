package rack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/sim/imexstandin"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// channelHealth is what pod's status says of its IMEX channel's health
// (KEP-4680), as "health:message".
func channelHealth(t *testing.T, ns, pod string) string {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		for _, rs := range cs.AllocatedResourcesStatus {
			if !strings.Contains(string(rs.Name), "imex") {
				continue
			}
			for _, r := range rs.Resources {
				m := ""
				if r.Message != nil {
					m = *r.Message
				}
				return string(r.Health) + ":" + m
			}
		}
	}
	return ""
}

// TestIMEXHealthInPodStatus: a running job's worker on a tray whose IMEX
// daemon fails sees its channel Unhealthy in its pod's status, with the
// daemon's status; once the daemon is back, Healthy again.
func TestIMEXHealthInPodStatus(t *testing.T) {
	ctx := context.Background()
	ns := e2eutil.Namespace(t, client, "")
	pods := job(t, ns, "job-e", 4)
	if err := scenario.WaitRunning(ctx, client, ns, pods, 180*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endJob(t, ns, "job-e", pods) })
	var victim, tray string
	for _, name := range pods {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(trays, p.Spec.NodeName) {
			victim, tray = name, p.Spec.NodeName
			break
		}
	}
	wait := func(want string) {
		t.Helper()
		if err := scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
			got := channelHealth(t, ns, victim)
			return strings.HasPrefix(got, want), fmt.Sprintf("pod %s on %s: channel health %q, want %s", victim, tray, got, want)
		}); err != nil {
			t.Fatal(err)
		}
	}
	wait("Healthy")
	if err := imexstandin.InjectFault(cluster.IMEXConfig(tray), "e2e: lost the NVLink fabric"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = imexstandin.ClearFault(cluster.IMEXConfig(tray)) })
	wait("Unhealthy:the node's IMEX daemon is not ready: NOT_READY: injected fault: e2e: lost the NVLink fabric")
	if err := imexstandin.ClearFault(cluster.IMEXConfig(tray)); err != nil {
		t.Fatal(err)
	}
	wait("Healthy")
}
