package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/internal/inspect/agents"
	"github.com/tessera-gpu/tessera/internal/inspect/top"
)

// topFlags are the flags of both top commands.
type topFlags struct {
	output, sortBy, selector, prometheus string
	metricsURLs                          []string
	tokenFile, caFile                    string
}

func (f *topFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: wide, json or yaml (default a table)")
	cmd.Flags().StringVar(&f.sortBy, "sort-by", "", "order busiest first by utilization or memory (default by name)")
	cmd.Flags().StringArrayVar(&f.metricsURLs, "metrics-url", nil,
		"NODE=URL: read NODE's agent metrics at URL (e.g. https://127.0.0.1:PORT/metrics as the local cluster prints it; see --metrics-ca-file) instead of through its pod; repeatable")
	cmd.Flags().StringVar(&f.selector, "agent-selector", agents.DefaultSelector, "label selector of the agent pods (the chart's DaemonSet), in all namespaces")
	cmd.Flags().StringVar(&f.prometheus, "prometheus-url", "", "ask this Prometheus (http://HOST:PORT), which scrapes the agents, instead of the agents")
	cmd.Flags().StringVar(&f.tokenFile, "metrics-token-file", "", "send the agents the bearer token in this file instead of your own credentials' (which may hold none: a client certificate), e.g. kubectl create token of a ServiceAccount that may get /metrics")
	cmd.Flags().StringVar(&f.caFile, "metrics-ca-file", "", "verify the certificates of https --metrics-url agents against the PEM CAs in this file (default: the system's)")
}

// agentToken is the bearer token the agents get: --metrics-token-file's,
// else the one the caller's credentials send the API server ("" for a
// client certificate).
func (f *topFlags) agentToken(src *source) (string, error) {
	if f.tokenFile != "" {
		return agents.ReadTokenFile(f.tokenFile)
	}
	rc, err := src.config.ToRESTConfig()
	if err != nil {
		return "", err
	}
	return agents.BearerToken(rc)
}

// gather reads the agents' (or Prometheus') series for nodes.
func (f *topFlags) gather(cmd *cobra.Command, src *source, nodes []string) (*top.Top, error) {
	if err := top.CheckFlags(f.output, f.sortBy); err != nil {
		return nil, err
	}
	urls, err := agents.ParseURLs(f.metricsURLs)
	if err != nil {
		return nil, err
	}
	c, err := src.client()
	if err != nil {
		return nil, err
	}
	o := top.Options{Nodes: nodes, MetricsURLs: urls, AgentSelector: f.selector, PrometheusURL: f.prometheus}
	if f.prometheus == "" {
		if o.Token, err = f.agentToken(src); err != nil {
			return nil, err
		}
		if o.HTTPClient, err = agents.HTTPClient(f.caFile); err != nil {
			return nil, err
		}
	}
	res, err := top.Gather(cmd.Context(), c, o)
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	return top.Build(res.Series, res.Shares), nil
}

func newTop(src *source) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "top",
		Short: "GPU use per pod or node: utilization, memory used of what it may use, power, temperature",
		Long: `GPU use per pod or node, from the agents' own metrics (tessera_gpu_* joined with
tessera_device_allocation_info, docs/metrics.md): read through the API server's
proxy to each agent pod (get pods/proxy), at --metrics-url for agents that run
as host processes, or from a Prometheus that scrapes them (--prometheus-url).

An agent serves /metrics only to a user who may get the non-resource URL
/metrics (the chart's <release>-metrics-reader ClusterRole): top sends it your
credentials' bearer token, over HTTPS only, or --metrics-token-file's where
your credentials are a client certificate (docs/kubectl-tessera.md).

A device several pods share reports its whole readings, marked *: the hardware
reports none per pod.`,
	}
	cmd.AddCommand(newTopPods(src), newTopNodes(src))
	return cmd
}

func newTopPods(src *source) *cobra.Command {
	f := &topFlags{}
	var node string
	cmd := &cobra.Command{
		Use:   "pods [POD...]",
		Short: "One line per pod and device it holds: utilization and memory used of what it may use",
		Example: `  kubectl tessera top pods
  kubectl tessera top pods -n team-a --sort-by utilization
  kubectl tessera top pods --node gpu-h100 -o wide
  kubectl tessera top pods --prometheus-url http://prometheus.monitoring:9090`,
		RunE: func(cmd *cobra.Command, pods []string) error {
			var nodes []string
			if node != "" {
				nodes = []string{node}
			}
			t, err := f.gather(cmd, src, nodes)
			if err != nil {
				return err
			}
			ns := ""
			if cmd.Flags().Changed("namespace") {
				ns = *src.config.Namespace
			}
			t.Pods = slices.DeleteFunc(t.Pods, func(p top.Pod) bool {
				return (ns != "" && p.Namespace != ns) || (len(pods) > 0 && !slices.Contains(pods, p.Pod)) || (node != "" && p.Node != node)
			})
			return top.PrintPods(cmd.OutOrStdout(), t, f.output, f.sortBy)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&node, "node", "", "only the pods on this node")
	return cmd
}

func newTopNodes(src *source) *cobra.Command {
	f := &topFlags{}
	cmd := &cobra.Command{
		Use:   "nodes [NODE...]",
		Short: "One line per GPU node: GPUs, in use, pods, mean utilization, memory, power and the hottest GPU",
		Example: `  kubectl tessera top nodes
  kubectl tessera top nodes gpu-h100 -o wide`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			t, err := f.gather(cmd, src, nodes)
			if err != nil {
				return err
			}
			return top.PrintNodes(cmd.OutOrStdout(), t, f.output, f.sortBy)
		},
	}
	f.add(cmd)
	return cmd
}
