package rack

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestDemoRackJob runs demo/19-rack-job-one-domain.yaml as `make demo`
// does: both workers run, each on a tray of the domain, with one channel
// node between them (test/e2e's TestScenarios leaves it to this suite,
// whose cluster has the trays).
func TestDemoRackJob(t *testing.T) {
	ctx := context.Background()
	ns := e2eutil.Namespace(t, client, "")
	sc, err := scenario.Load(filepath.Join(repo, "demo", "19-rack-job-one-domain.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if why, err := sc.Missing(ctx, client); err != nil || why != "" {
		t.Fatalf("the scenario cannot run on the rack: %s %v", why, err)
	}
	if err := sc.Apply(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	var pods []string
	for _, p := range sc.Pods {
		pods = append(pods, p.Name)
	}
	if err := scenario.WaitRunning(ctx, client, ns, pods, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	channelOfContainer(t, ns, pods, "train")
	if err := sc.Delete(ctx, client, ns, 120*time.Second); err != nil {
		t.Fatal(err)
	}
}
