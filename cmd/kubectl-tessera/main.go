// Command kubectl-tessera is the kubectl plugin for Tessera GPUs
// (`kubectl tessera ...` once on PATH). It only reads: ResourceSlices and
// ResourceClaims, from the cluster or from files (-f). The logic lives in
// internal/inspect and its packages per command; this is flags and wiring.
package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inspect/inventorycmd"
	"github.com/tessera-gpu/tessera/internal/inspect/topocmd"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/version"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		os.Exit(1)
	}
}

// source is where a read command's objects come from.
type source struct {
	config *genericclioptions.ConfigFlags
	files  []string
}

// snapshot reads the files when -f is given, else the cluster (the slices
// of node only, when node is not empty).
func (s *source) snapshot(ctx context.Context, node string) (*inspect.Snapshot, error) {
	if len(s.files) > 0 {
		return inspect.LoadFiles(s.files)
	}
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	return inspect.FromCluster(ctx, c, node)
}

// client is a clientset for the cluster the kubeconfig flags name.
func (s *source) client() (kubernetes.Interface, error) {
	rc, err := s.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

func (s *source) addFileFlag(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&s.files, "filename", "f", nil,
		"read ResourceSlices (and ResourceClaims) from this YAML/JSON file instead of the cluster, e.g. tessera-kubelet-plugin --dry-run output; repeatable; - is stdin")
}

func newRoot() *cobra.Command {
	src := &source{config: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-tessera",
		Short: "Inspect the GPUs the Tessera DRA driver (" + names.DriverName + ") publishes",
		Long: "Inspect the GPUs the Tessera DRA driver (" + names.DriverName + ") publishes.\n\n" +
			"Reads ResourceSlices and ResourceClaims (in all namespaces; --namespace filters only top pods), and the agents' metrics for top; never writes to the cluster.",
		SilenceUsage: true,
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl tessera"},
		// --version, as every Tessera binary answers it.
		Version: version.Get().String(),
	}
	root.SetVersionTemplate("kubectl-tessera {{.Version}}\n")
	src.config.AddFlags(root.PersistentFlags())
	root.AddCommand(newInventory(src), newTopo(src), newExplain(src), newDoctor(src), newTop(src), newVersion())
	return root
}

// newVersion is `kubectl tessera version`, kubectl's own spelling of
// --version.
func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, commit and build date",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			version.Print(cmd.OutOrStdout(), "kubectl-tessera", false)
		},
	}
}

func newInventory(src *source) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "inventory [NODE...]",
		Short: "One line per GPU: model, memory, fabric island, partitioning, health and who holds it",
		Example: `  kubectl tessera inventory
  kubectl tessera inventory node-1 -o wide
  tessera-kubelet-plugin --backend=sim --sim-profile=dgx-h100 --node-name=node-1 --sim-state-dir=$(mktemp -d) --dry-run > node-1.yaml
  kubectl tessera inventory -f node-1.yaml -f claims.yaml`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			if err := inventorycmd.CheckOutput(output); err != nil {
				return err
			}
			node := ""
			if len(nodes) == 1 {
				node = nodes[0]
			}
			s, err := src.snapshot(cmd.Context(), node)
			if err != nil {
				return err
			}
			inv, err := inventorycmd.Build(s, nodes)
			if err != nil {
				return err
			}
			return inventorycmd.Print(cmd.OutOrStdout(), inv, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml (default a table)")
	src.addFileFlag(cmd)
	return cmd
}

func newTopo(src *source) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topo NODE",
		Short: "The GPU-to-GPU matrix of a node, as nvidia-smi topo -m prints it, from published attributes",
		Example: `  kubectl tessera topo node-1
  kubectl tessera topo node-1 -f node-1.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := src.snapshot(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			t, err := topocmd.Build(s, args[0])
			if err != nil {
				return err
			}
			return topocmd.Print(cmd.OutOrStdout(), t)
		},
	}
	src.addFileFlag(cmd)
	return cmd
}
