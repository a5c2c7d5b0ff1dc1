package containerd

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestWebhookFromTheChart: the admission webhook runs as the chart's
// Deployment from the image built here, the API server calls it behind its
// Service with the chart's generated certificate, and it refuses demo 13's
// bad claim naming the field, while a claim without Tessera config is
// admitted.
func TestWebhookFromTheChart(t *testing.T) {
	ctx := context.Background()
	waitWebhook(t)
	ns := namespace(t, "")
	sc, err := scenario.Load(scenarioPath("13-bad-config-refused.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc.UseImage(localcluster.ProbeImage)
	if err := sc.Apply(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	msg := sc.Rejected["ResourceClaim too-many-threads"]
	for _, want := range []string{"denied the request", "spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage", "must be between 1 and 100"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the API server's refusal %q does not mention %q", msg, want)
		}
	}
	// Without Tessera config the webhook is not even asked.
	runOnNode(t, ns, nodes[0].Name)
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == "True"
		}
	}
	return false
}

// waitWebhook waits until the API server can reach the chart's webhook:
// its Deployment available and a ready endpoint behind its Service. A test
// creating objects with Tessera config waits for it; until then the API
// server refuses them (the webhook fails closed).
func waitWebhook(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	name := localcluster.AgentRelease(nodes[0].Name) + "-webhook"
	if err := scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
		d, err := client.AppsV1().Deployments(localcluster.AgentNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !deploymentAvailable(d) {
			return false, "Deployment " + name + " not available"
		}
		l, err := client.DiscoveryV1().EndpointSlices(localcluster.AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					return true, ""
				}
			}
		}
		return false, "Service " + name + " has no ready endpoint"
	}); err != nil {
		t.Fatal(err)
	}
}
