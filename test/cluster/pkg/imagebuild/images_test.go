package imagebuild

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/release"
)

// TestDockerfileDescribesTheSameImages: deployments/Dockerfile, for those
// who build with Docker, makes the images Images makes: a stage per image,
// of the same name, with the same entrypoint, user and programs, on the
// matching distroless base (static for Static, base for Glibc). No Docker
// runs here, so this is the one check that the two do not drift apart.
func TestDockerfileDescribesTheSameImages(t *testing.T) {
	data, err := os.ReadFile("../../../../deployments/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages, err := release.DockerfileImages(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range Images() {
		st, ok := stages[im.Name]
		if !ok {
			t.Errorf("%s: no Dockerfile stage of that name", im.Name)
			continue
		}
		if !slices.Equal(st.Entrypoint, im.Entrypoint) {
			t.Errorf("%s: Dockerfile ENTRYPOINT %q, images %q", im.Name, st.Entrypoint, im.Entrypoint)
		}
		if st.User != im.User {
			t.Errorf("%s: Dockerfile USER %q, images %q", im.Name, st.User, im.User)
		}
		if !slices.Equal(st.Files, im.Files()) {
			t.Errorf("%s: Dockerfile copies %q, images carry %q", im.Name, st.Files, im.Files())
		}
		want := map[Base]string{Static: "gcr.io/distroless/static-", Glibc: "gcr.io/distroless/base-"}[im.Base]
		if !strings.HasPrefix(st.Base, want) {
			t.Errorf("%s: Dockerfile base %q, want %s... for the %s base", im.Name, st.Base, want, im.Base)
		}
	}
}

// TestImagesAreTheChartsImages: the three images, and no two of a name.
func TestImagesAreTheChartsImages(t *testing.T) {
	var names []string
	for _, im := range Images() {
		names = append(names, im.Name)
		if _, ok := Lookup(im.Name); !ok {
			t.Errorf("Lookup(%q) finds nothing", im.Name)
		}
	}
	if got := strings.Join(names, " "); got != "tessera-kubelet-plugin tessera-kubelet-plugin-sim tessera-webhook" {
		t.Errorf("images %s", got)
	}
}
