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
	"github.com/tessera-gpu/tessera/test/cluster/pkg/promtest"
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
// daemon's status, and TesseraIMEXNotReady fires for that tray in a real
// Prometheus scraping the trays' agents with the chart's rules; once the
// daemon is back, Healthy again, the gauge 1 and the alert gone.
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
	prom := startPrometheus(t)
	alert := func(want string, value float64) {
		t.Helper()
		// The rule's for: 2m, after the agent's next ask (10 s).
		if err := scenario.Poll(ctx, 200*time.Second, func() (bool, string) {
			got, err := prom.Query(fmt.Sprintf(`tessera_imex_daemon_ready{node=%q}`, tray))
			if err != nil || len(got) != 1 || got[0].Value != value {
				return false, fmt.Sprintf("tessera_imex_daemon_ready of %s: %v, %v; want %v", tray, got, err, value)
			}
			st, err := prom.AlertState("TesseraIMEXNotReady", map[string]string{"node": tray})
			return err == nil && st == want, fmt.Sprintf("TesseraIMEXNotReady of %s: %q, %v; want %q", tray, st, err, want)
		}); err != nil {
			t.Fatal(err)
		}
	}
	alert("", 1)
	if err := imexstandin.InjectFault(cluster.IMEXConfig(tray), "e2e: lost the NVLink fabric"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = imexstandin.ClearFault(cluster.IMEXConfig(tray)) })
	wait("Unhealthy:the node's IMEX daemon is not ready: NOT_READY: injected fault: e2e: lost the NVLink fabric")
	alert("firing", 0)
	if err := imexstandin.ClearFault(cluster.IMEXConfig(tray)); err != nil {
		t.Fatal(err)
	}
	wait("Healthy")
	alert("", 1)
}

// startPrometheus starts a real Prometheus scraping the trays' agents as
// the chart's ServiceMonitor does, with the chart's rules.
func startPrometheus(t *testing.T) *promtest.Server {
	t.Helper()
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	return promtest.Start(t, cluster, s, repo, promtest.AgentsJob(cluster, s, trays, promtest.Job, promtest.Bearer(cluster.MetricsTokenFile())))
}
