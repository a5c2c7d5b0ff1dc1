// Command bench-prepare measures prepare and unprepare of Tessera's kubelet
// plugin, and of a reference driver's when given one, over the plugin's
// gRPC socket against a real API server (pkg/preparebench): `make
// bench-prepare [REFERENCE=path/to/dra-example-kubeletplugin]`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/preparebench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-prepare:", err)
		os.Exit(1)
	}
}

func run() error {
	repo := flag.String("repo", ".", "repository root")
	reference := flag.String("reference", "", "the dra-example-driver kubelet plugin binary (sigs.k8s.io/dra-example-driver, cmd/dra-example-kubeletplugin), measured in the same run; empty measures Tessera only")
	var o preparebench.Options
	flag.IntVar(&o.Sequential, "sequential", 60, "claims prepared and unprepared one at a time per round")
	flag.IntVar(&o.Waves, "waves", 20, "waves of --in-flight claims per round")
	flag.IntVar(&o.InFlight, "in-flight", 8, "concurrent calls per wave, one claim and one device each")
	flag.IntVar(&o.Rounds, "rounds", 5, "rounds; figures are medians over rounds")
	readyzFlood := flag.Int("readyz-flood", 0, "also measure Tessera (defaults) with this many /readyz requests kept in flight against its metrics port, in the same run; 0 skips it")
	readyzRate := flag.Int("readyz-flood-rate", 0, "at most this many flood requests a second; 0: as fast as they are answered")
	telemetryPoll := flag.String("telemetry-poll", "", "also measure Tessera (defaults) with its metrics on and device telemetry polled this often (e.g. 100ms), in the same run; empty skips it")
	flag.Parse()
	root, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c := localcluster.ForRepo(root)
	c.Dir = filepath.Join(root, "_output/bench-prepare")
	c.Nodes = nil
	if err := c.Up(ctx, os.Stderr); err != nil {
		return err
	}
	defer func() {
		if err := c.Down(os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "cluster down:", err)
		}
	}()
	// Creating and allocating the claims is the harness's work, not the
	// plugins': it must not wait on a rate limiter.
	client, err := c.ClientWithRate(5000, 10000)
	if err != nil {
		return err
	}
	// Both drivers' API clients raised alike, so their own limiters do not
	// decide the figures; then Tessera with its defaults.
	raised := []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}
	type run struct {
		flags  string
		driver preparebench.Driver
	}
	agent := filepath.Join(root, "bin/tessera-kubelet-plugin")
	runs := []run{{"client limits raised", preparebench.Tessera(agent, raised...)}}
	if *reference != "" {
		runs = append(runs, run{"client limits raised", preparebench.Reference(*reference, raised...)})
	}
	runs = append(runs, run{"defaults", preparebench.Tessera(agent)})
	plainRun := len(runs) - 1 // Tessera with its defaults
	if *readyzFlood > 0 {
		d, err := preparebench.TesseraFlooded(agent, *readyzFlood, *readyzRate)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("defaults, %d /readyz in flight", *readyzFlood)
		if *readyzRate > 0 {
			what += fmt.Sprintf(" at %d/s", *readyzRate)
		}
		runs = append(runs, run{what, d})
	}
	telemetryRun := -1
	if *telemetryPoll != "" {
		d, err := preparebench.TesseraTelemetry(agent, *telemetryPoll)
		if err != nil {
			return err
		}
		telemetryRun = len(runs)
		runs = append(runs, run{"defaults, telemetry every " + *telemetryPoll, d})
	}
	drivers := make([]preparebench.Driver, len(runs))
	for i, r := range runs {
		drivers[i] = r.driver
	}
	results, err := preparebench.Run(ctx, client, c.Kubeconfig(), filepath.Join(c.Dir, "plugins"), drivers, o)
	if err != nil {
		return err
	}
	fmt.Printf("\n| driver | flags | prepare p50 | of it, the claim GET | unprepare p50 | prepare, %d in flight | unprepare, %d in flight |\n|---|---|---|---|---|---|---|\n", o.InFlight, o.InFlight)
	for i, res := range results {
		fmt.Printf("| %s | %s | %s | %s | %s | %.0f claims/s | %.0f claims/s |\n", res.Label, runs[i].flags,
			res.PrepareP50.Round(time.Microsecond), res.GetP50.Round(time.Microsecond), res.UnprepareP50.Round(time.Microsecond), res.PrepareRate, res.UnprepareRate)
	}
	if *readyzFlood > 0 {
		plain, flooded := results[len(results)-2], results[len(results)-1]
		fmt.Printf("\nUnder the /readyz flood (%.0f answered/s, %d unanswered) / without: prepare p50 %.2fx, unprepare p50 %.2fx, prepare throughput %.2fx\n",
			flooded.ReadyzRate, flooded.ReadyzFailed, flooded.PrepareP50.Seconds()/plain.PrepareP50.Seconds(),
			flooded.UnprepareP50.Seconds()/plain.UnprepareP50.Seconds(), flooded.PrepareRate/plain.PrepareRate)
	}
	if telemetryRun >= 0 {
		plain, tel := results[plainRun], results[telemetryRun]
		fmt.Printf("\nWith telemetry every %s / without: prepare p50 %.2fx, unprepare p50 %.2fx, prepare throughput %.2fx\n", *telemetryPoll,
			tel.PrepareP50.Seconds()/plain.PrepareP50.Seconds(), tel.UnprepareP50.Seconds()/plain.UnprepareP50.Seconds(), tel.PrepareRate/plain.PrepareRate)
	}
	if *reference != "" {
		t, ref := results[0], results[1]
		fmt.Printf("\nTessera / reference: prepare p50 %.2fx, unprepare p50 %.2fx, prepare throughput %.2fx, unprepare throughput %.2fx\n",
			t.PrepareP50.Seconds()/ref.PrepareP50.Seconds(), t.UnprepareP50.Seconds()/ref.UnprepareP50.Seconds(),
			t.PrepareRate/ref.PrepareRate, t.UnprepareRate/ref.UnprepareRate)
	}
	return nil
}
