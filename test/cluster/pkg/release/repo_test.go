package release

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The repository's own files, as the release targets judge them.
const (
	repoDockerfile = "../../../../deployments/Dockerfile"
	repoKrew       = "../../../../deployments/krew/tessera.yaml"
)

func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestRepoDockerfile: the committed Dockerfile names its bases by tag, so
// the check refuses each registry FROM and none of the stage ones; pinned
// with a resolver it passes, only those lines changed.
func TestRepoDockerfile(t *testing.T) {
	data := readRepoFile(t, repoDockerfile)
	lines := splitLines(data)
	var registry []int // lines of FROMs that pull
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM golang:") || strings.HasPrefix(l, "FROM gcr.io/") {
			registry = append(registry, i+1)
		}
	}
	if len(registry) < 3 {
		t.Fatalf("%d registry FROM lines in %s; the test expects the build, webhook and agent bases", len(registry), repoDockerfile)
	}
	var refused []int
	for _, p := range CheckDockerfile("deployments/Dockerfile", data) {
		refused = append(refused, p.Line)
		if !strings.Contains(p.Msg, "not pinned by digest") {
			t.Errorf("problem %s", p)
		}
	}
	if !slices.Equal(refused, registry) {
		t.Errorf("refused lines %v, want the registry FROM lines %v", refused, registry)
	}

	argv, log := fakeResolver(t)
	pinnedData, err := PinImages(context.Background(), data, CommandResolver(argv))
	if err != nil {
		t.Fatal(err)
	}
	if p := CheckDockerfile("deployments/Dockerfile", pinnedData); len(p) > 0 {
		t.Errorf("pinned Dockerfile refused: %q", p)
	}
	after := splitLines(pinnedData)
	if len(after) != len(lines) {
		t.Fatalf("%d lines after pinning, %d before", len(after), len(lines))
	}
	for i := range lines {
		changed := lines[i] != after[i]
		if changed != slices.Contains(registry, i+1) {
			t.Errorf("line %d: %q became %q", i+1, lines[i], after[i])
		}
		if changed && !strings.Contains(after[i], "@sha256:") {
			t.Errorf("line %d pinned as %q", i+1, after[i])
		}
	}
	if !strings.Contains(pinnedData, "FROM golang:${GO_VERSION}-bookworm@sha256:") {
		t.Errorf("the build stage's ARG not kept as written:\n%s", pinnedData)
	}
	calls := strings.Fields(readRepoFile(t, log))
	for _, c := range calls {
		if strings.Contains(c, "$") {
			t.Errorf("resolver asked for %q: ARGs must be substituted first", c)
		}
	}
	if !slices.Contains(calls, "gcr.io/distroless/base-debian12") || !slices.Contains(calls, "gcr.io/distroless/static-debian12:nonroot") {
		t.Errorf("resolver asked for %q", calls)
	}
}

// TestRepoKrewManifest: the committed template is refused (placeholders),
// and filled from an archive for each of its platforms, it passes.
func TestRepoKrewManifest(t *testing.T) {
	tmpl := []byte(readRepoFile(t, repoKrew))
	if p := CheckKrew("deployments/krew/tessera.yaml", tmpl, "v0.1.0"); len(p) == 0 {
		t.Error("the template passed the release check")
	}
	m, errs := parseManifest(tmpl)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var platforms []string
	for _, p := range m.platforms {
		platforms = append(platforms, p.os+"_"+p.arch)
	}
	for _, want := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		if !slices.Contains(platforms, want) {
			t.Errorf("template platforms %q lack %s, which make release-krew builds", platforms, want)
		}
	}
	dist := writeArchives(t, platforms...)
	filled, err := FillKrew(tmpl, "v0.1.0", DownloadURL, dist)
	if err != nil {
		t.Fatal(err)
	}
	if p := CheckKrew("tessera.yaml", filled, "v0.1.0"); len(p) > 0 {
		t.Errorf("filled manifest refused:\n%s", problems(p))
	}
	if !strings.Contains(string(filled), DownloadURL+"/v0.1.0/kubectl-tessera_linux_amd64.tar.gz") {
		t.Errorf("filled manifest:\n%s", filled)
	}
	if err := os.Remove(filepath.Join(dist, ArchiveName(m.platforms[0].os, m.platforms[0].arch))); err != nil {
		t.Fatal(err)
	}
	if _, err := FillKrew(tmpl, "v0.1.0", DownloadURL, dist); err == nil || !strings.Contains(err.Error(), m.platforms[0].os+"/"+m.platforms[0].arch) {
		t.Errorf("an archive missing: %v", err)
	}
}
