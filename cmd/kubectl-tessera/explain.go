package main

import (
	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/internal/inspect/explain"
)

func newExplain(src *source) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "explain CLAIM|pod/POD|podgroup/GROUP",
		Short: "Why a pending claim (or a pod's claims) fits or not on each node, from the scheduler's own allocator",
		Long: "Runs the Kubernetes scheduler's DRA allocator (k8s.io/dynamic-resource-allocation/structured) over the\n" +
			"driver's ResourceSlices, the DeviceClasses and the claims already allocated, node by node, for one\n" +
			"pending ResourceClaim or the claims of a pod. Each node's verdict is the allocator's; for a node that\n" +
			"fits it shows the devices the allocator would pick, for one that does not it says why: how many devices\n" +
			"the class and each selector match, how many are in use (and by whom), blocked by exhausted shared\n" +
			"counters (and by whom), tainted or short of capacity, and which constraint no set of devices meets.\n\n" +
			"With -f, DeviceClasses, Pods and ResourceClaimTemplates are read from the files too; without\n" +
			"DeviceClasses there, the ones shipped with Tessera are used. A pod's claim from a template that does\n" +
			"not exist yet is built from the template.\n\n" +
			"A PodGroup (the Workload API's gang), or a pod that belongs to one, is explained as a group: its pods\n" +
			"are placed one at a time with the allocator, each holding its devices (a claim of the group allocated\n" +
			"once), and the first that fits on no node is explained node by node.",
		Example: `  kubectl tessera explain my-claim -n team-a
  kubectl tessera explain pod/too-big-job
  kubectl tessera explain podgroup/train-12
  kubectl tessera explain pod/too-big-job -f node-1.yaml -f node-2.yaml -f demo/08-unsatisfiable.yaml -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := explain.CheckOutput(output); err != nil {
				return err
			}
			ctx := cmd.Context()
			var in *explain.Input
			var ns string
			if len(src.files) > 0 {
				// Offline: objects without a namespace match any; -n narrows.
				if src.config.Namespace != nil {
					ns = *src.config.Namespace
				}
				var err error
				if in, err = explain.LoadFiles(src.files); err != nil {
					return err
				}
			} else {
				var err error
				if ns, _, err = src.config.ToRawKubeConfigLoader().Namespace(); err != nil {
					return err
				}
				s, err := src.snapshot(ctx, "")
				if err != nil {
					return err
				}
				c, err := src.client()
				if err != nil {
					return err
				}
				if in, err = explain.InputFromCluster(ctx, c, s, ns, args[0]); err != nil {
					return err
				}
			}
			// A pod of a gang is explained with its gang: alone it may
			// fit where the group does not.
			if group := in.GangTarget(ns, args[0]); group != "" {
				gx, err := explain.RunGang(ctx, in, ns, group)
				if err != nil {
					return err
				}
				return explain.PrintGang(cmd.OutOrStdout(), gx, output)
			}
			pod, claims, err := in.Resolve(ns, args[0])
			if err != nil {
				return err
			}
			ex, err := explain.Run(ctx, in, pod, claims)
			if err != nil {
				return err
			}
			return explain.Print(cmd.OutOrStdout(), ex, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default text)")
	src.addFileFlag(cmd)
	return cmd
}
