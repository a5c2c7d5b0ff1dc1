package localcluster

import (
	"slices"
	"strings"
	"testing"
)

// TestAgentImages: the production-shaped agent image holds the agent alone
// and the sim image the agent with tessera-sim beside it, as
// deployments/Dockerfile's two targets; every image has its own archive.
func TestAgentImages(t *testing.T) {
	c := ForRepo("/repo")
	files := map[string][]string{} // ref → image paths
	archives := map[string]string{}
	for _, sp := range c.imageSpecs() {
		if other, dup := archives[sp.archive]; dup {
			t.Errorf("images %s and %s share the archive %s", other, sp.ref, sp.archive)
		}
		archives[sp.archive] = sp.ref
		args := sp.args("/out/" + sp.archive)
		if !slices.Contains(args, "--ref="+sp.ref) || !slices.Contains(args, "--entrypoint="+sp.entrypoint) {
			t.Errorf("%s: oci-image arguments %q", sp.ref, args)
		}
		for _, f := range sp.files {
			_, image, _ := strings.Cut(f, "=")
			files[sp.ref] = append(files[sp.ref], image)
		}
	}
	for _, tc := range []struct {
		ref  string
		want []string
	}{
		{AgentImageRepository + ":" + ImageTag, []string{"/usr/bin/tessera-kubelet-plugin", "/usr/bin/tessera-cdi-hook"}},
		{AgentSimImageRepository + ":" + ImageTag, []string{"/usr/bin/tessera-kubelet-plugin", "/usr/bin/tessera-sim", "/usr/bin/tessera-cdi-hook"}},
	} {
		if got := files[tc.ref]; !slices.Equal(got, tc.want) {
			t.Errorf("%s holds %q, want %q", tc.ref, got, tc.want)
		}
	}
	for _, sp := range c.imageSpecs() {
		if sp.ref == AgentSimImageRepository+":"+ImageTag && !slices.Contains(sp.files, "/repo/bin/tessera-sim=/usr/bin/tessera-sim") {
			t.Errorf("sim image files %q: tessera-sim must come from beside the plugin binary", sp.files)
		}
	}
}
