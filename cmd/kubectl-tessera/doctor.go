package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/internal/inspect/agents"
	"github.com/tessera-gpu/tessera/internal/inspect/doctor"
)

// newDoctor is `kubectl tessera doctor [NODE...]`: the troubleshooting
// table as checks against the live cluster. It exits 1 when a check fails
// (an *doctor.ChecksFailedError, printed by nobody: the findings say it).
func newDoctor(src *source) *cobra.Command {
	var (
		metricsURLs []string
		selector    string
		caFile      string
	)
	cmd := &cobra.Command{
		Use:   "doctor [NODE...]",
		Short: "Check the driver's setup and each GPU node: PASS, WARN or FAIL with what to do",
		Long: `Check the driver's setup and each GPU node (those named, or every node with
Tessera ResourceSlices), one line per finding:

  PASS|WARN|FAIL  CHECK  DETAIL  fix: WHAT TO DO

Checks: the shipped DeviceClasses are installed; per node: the Node exists and
is Ready; the node's pool is published (every slice of its newest generation,
no leftovers of older ones); the agent's /readyz (through the API server's
proxy to its pod, or at --metrics-url); device taints (health); claims whose
prepare failed (Prepared=False) and pods with FailedPrepareDynamicResources
events in the last hour; the tessera.dev/partitioning label against what is
published. Exits 1 when any check fails.

Needs the cluster (no -f) and list on resourceslices, deviceclasses,
resourceclaims, nodes, events and pods, and get on pods/proxy.`,
		Example: `  kubectl tessera doctor
  kubectl tessera doctor gpu-h100
  # the local cluster prints each node's metrics URL; doctor asks /readyz there
  kubectl tessera doctor gpu-h100 --metrics-url gpu-h100=https://127.0.0.1:39123/metrics --metrics-ca-file ca.crt`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			urls, err := agents.ParseURLs(metricsURLs)
			if err != nil {
				return err
			}
			hc, err := agents.HTTPClient(caFile)
			if err != nil {
				return err
			}
			c, err := src.client()
			if err != nil {
				return err
			}
			in, err := doctor.Gather(cmd.Context(), c, doctor.Options{
				Nodes:         nodes,
				MetricsURLs:   urls,
				AgentSelector: selector,
				HTTPClient:    hc,
			})
			if err != nil {
				return err
			}
			err = doctor.Print(cmd.OutOrStdout(), doctor.Run(in))
			var failed *doctor.ChecksFailedError
			if errors.As(err, &failed) {
				// The findings and the summary already say it: exit 1
				// without "Error: ..." or the usage.
				cmd.SilenceErrors = true
				cmd.SilenceUsage = true
			}
			return err
		},
	}
	cmd.Flags().StringArrayVar(&metricsURLs, "metrics-url", nil,
		"NODE=URL: ask NODE's agent /readyz at the host:port of URL (its metrics URL, e.g. http://127.0.0.1:PORT/metrics as the local cluster prints it) instead of through its pod; repeatable")
	cmd.Flags().StringVar(&selector, "agent-selector", doctor.DefaultAgentSelector,
		"label selector of the agent pods (the chart's DaemonSet), in all namespaces")
	cmd.Flags().StringVar(&caFile, "metrics-ca-file", "",
		"verify the certificates of https --metrics-url agents against the PEM CAs in this file (default: the system's)")
	return cmd
}
