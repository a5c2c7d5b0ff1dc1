package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// krewTemplate is a manifest template of two platforms, as the committed
// one marks its placeholders.
const krewTemplate = `# header. PLACEHOLDERS: filled by the release.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: tessera
spec:
  version: v0.0.0-RELEASE-VERSION # PLACEHOLDER: release tag
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    # PLACEHOLDER: uri and sha256.
    uri: https://example.com/RELEASE-VERSION/kubectl-tessera_linux_amd64.tar.gz
    sha256: "RELEASE-PROCESS-FILLS-SHA256"
    bin: kubectl-tessera
  - selector:
      matchLabels:
        os: darwin
        arch: arm64
    uri: https://example.com/RELEASE-VERSION/kubectl-tessera_darwin_arm64.tar.gz
    sha256: "RELEASE-PROCESS-FILLS-SHA256"
    bin: kubectl-tessera
`

const sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// filledManifest is krewTemplate as filled for v1.2.3, with edit applied.
func filledManifest(edit func(string) string) string {
	s := strings.NewReplacer(
		"v0.0.0-RELEASE-VERSION # PLACEHOLDER: release tag", "v1.2.3",
		"    # PLACEHOLDER: uri and sha256.\n", "",
		"# header. PLACEHOLDERS: filled by the release.", "# header",
		"https://example.com/RELEASE-VERSION/", "https://example.com/download/v1.2.3/",
		`"RELEASE-PROCESS-FILLS-SHA256"`, `"`+sumA+`"`,
	).Replace(krewTemplate)
	if edit != nil {
		s = edit(s)
	}
	return s
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

// TestCheckKrew: a filled manifest passes for its version; a placeholder
// left, another version, or a malformed uri or sha256 is refused at its line.
func TestCheckKrew(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		version string
		want    []string // "line: words", nil: passes
	}{
		{name: "filled", data: filledManifest(nil), version: "v1.2.3"},
		{name: "pre-release tag", data: filledManifest(func(s string) string { return strings.ReplaceAll(s, "v1.2.3", "v1.2.3-rc.1") }), version: "v1.2.3-rc.1"},
		{name: "the template", data: krewTemplate, version: "v1.2.3", want: []string{
			"1: placeholder PLACEHOLDER left", "7: placeholder PLACEHOLDER left", "7: spec.version \"v0.0.0-RELEASE-VERSION\", want \"v1.2.3\"",
			"13: placeholder PLACEHOLDER", "14: placeholder RELEASE-VERSION", "14: platform linux/amd64: uri", "15: placeholder RELEASE-PROCESS", "15: platform linux/amd64: sha256",
			"21: placeholder RELEASE-VERSION", "21: platform darwin/arm64: uri", "22: placeholder RELEASE-PROCESS", "22: platform darwin/arm64: sha256"}},
		{name: "a placeholder comment left", data: filledManifest(replace("    bin: kubectl-tessera\n", "    bin: kubectl-tessera # PLACEHOLDER\n")), version: "v1.2.3",
			want: []string{"15: placeholder PLACEHOLDER left: bin: kubectl-tessera # PLACEHOLDER"}},
		{name: "other version", data: filledManifest(nil), version: "v1.2.4", want: []string{
			"7: spec.version \"v1.2.3\", want \"v1.2.4\"",
			"13: platform linux/amd64: uri \"https://example.com/download/v1.2.3/kubectl-tessera_linux_amd64.tar.gz\": want a path ending in /v1.2.4/kubectl-tessera_linux_amd64.tar.gz",
			"20: platform darwin/arm64: uri"}},
		{name: "not a release tag", data: filledManifest(func(s string) string { return strings.ReplaceAll(s, "v1.2.3", "1.2.3") }), version: "1.2.3",
			want: []string{"1: version \"1.2.3\" is not a release tag"}},
		{name: "http uri", data: filledManifest(replace("https://example.com", "http://example.com")), version: "v1.2.3",
			want: []string{"13: platform linux/amd64: uri \"http://example.com/download/v1.2.3/kubectl-tessera_linux_amd64.tar.gz\": want an https URL"}},
		{name: "another platform's archive", data: filledManifest(replace("kubectl-tessera_darwin_arm64", "kubectl-tessera_linux_amd64")), version: "v1.2.3",
			want: []string{"20: platform darwin/arm64: uri \"https://example.com/download/v1.2.3/kubectl-tessera_linux_amd64.tar.gz\": want a path ending in /v1.2.3/kubectl-tessera_darwin_arm64.tar.gz"}},
		{name: "short sha256", data: filledManifest(replace(sumA, sumA[1:])), version: "v1.2.3",
			want: []string{"14: platform linux/amd64: sha256 \"" + sumA[1:] + "\": want 64 lower-case hex digits"}},
		{name: "upper-case sha256", data: filledManifest(replace(sumA, strings.ToUpper(sumA))), version: "v1.2.3",
			want: []string{"14: platform linux/amd64: sha256"}},
		{name: "sha256 missing", data: filledManifest(replace("    sha256: \""+sumA+"\"\n", "")), version: "v1.2.3",
			want: []string{"9: platform linux/amd64: sha256 missing"}},
		{name: "platform without arch", data: filledManifest(replace("        arch: amd64\n", "")), version: "v1.2.3",
			want: []string{"9: spec.platforms[0].selector.matchLabels: want os and arch"}},
		{name: "platform twice", data: filledManifest(replace("os: darwin\n        arch: arm64", "os: linux\n        arch: amd64")), version: "v1.2.3",
			want: []string{"16: spec.platforms[1]: linux/amd64 listed twice", "20: platform linux/amd64: uri"}},
		{name: "not krew", data: filledManifest(replace("kind: Plugin", "kind: Index")), version: "v1.2.3", want: []string{"2: kind: want Plugin"}},
		{name: "no platforms", data: "apiVersion: " + krewAPIVersion + "\nkind: Plugin\nspec:\n  version: v1.2.3\n", version: "v1.2.3",
			want: []string{"4: spec.platforms: none"}},
		{name: "not YAML", data: "a: [\n", version: "v1.2.3", want: []string{"1: yaml:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckKrew("tessera.yaml", []byte(tc.data), tc.version)
			if len(got) != len(tc.want) {
				t.Fatalf("problems:\n%s\nwant %d: %q", problems(got), len(tc.want), tc.want)
			}
			for i, p := range got {
				line, words, _ := strings.Cut(tc.want[i], ": ")
				if s := p.String(); !strings.HasPrefix(s, "tessera.yaml:"+line+": ") || !strings.Contains(s, words) {
					t.Errorf("problem %q, want tessera.yaml:%s ... %s", s, line, words)
				}
			}
		})
	}
}

func problems(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

// TestFillKrew: the filled manifest has the version, each platform's uri
// under the download URL and the sha256 of its archive's bytes (as
// sha256sum computes it), and passes CheckKrew; the template's fields
// that are not filled stay.
func TestFillKrew(t *testing.T) {
	dist := writeArchives(t, "linux_amd64", "darwin_arm64", "windows_amd64")
	got, err := FillKrew([]byte(krewTemplate), "v1.2.3", "https://example.com/download/", dist)
	if err != nil {
		t.Fatal(err)
	}
	if p := CheckKrew("tessera.yaml", got, "v1.2.3"); len(p) > 0 {
		t.Fatalf("filled manifest refused:\n%s\n%s", problems(p), got)
	}
	m, errs := parseManifest(got)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if v := value(m.spec, "version").Value; v != "v1.2.3" {
		t.Errorf("spec.version %q", v)
	}
	if len(m.platforms) != 2 {
		t.Fatalf("%d platforms, want the template's 2", len(m.platforms))
	}
	for _, p := range m.platforms {
		archive := ArchiveName(p.os, p.arch)
		if u, want := value(p.node, "uri").Value, "https://example.com/download/v1.2.3/"+archive; u != want {
			t.Errorf("%s/%s: uri %q, want %q", p.os, p.arch, u, want)
		}
		if s, want := value(p.node, "sha256").Value, sha256sum(t, filepath.Join(dist, archive)); s != want {
			t.Errorf("%s/%s: sha256 %q, sha256sum says %q", p.os, p.arch, s, want)
		}
		if b := value(p.node, "bin"); b == nil || b.Value != "kubectl-tessera" {
			t.Errorf("%s/%s: bin %v, want the template's", p.os, p.arch, b)
		}
	}
	if strings.Contains(string(got), "header") {
		t.Errorf("the template's header (about placeholders) kept:\n%s", got)
	}
}

// TestFillKrewArchiveMissing: a platform of the template without its
// archive fails the fill, naming every such platform and file.
func TestFillKrewArchiveMissing(t *testing.T) {
	tests := []struct {
		name     string
		archives []string
		want     []string
		not      []string
	}{
		{"one missing", []string{"linux_amd64"}, []string{"platform darwin/arm64", "kubectl-tessera_darwin_arm64.tar.gz"}, []string{"linux/amd64"}},
		{"both missing", nil, []string{"platform linux/amd64", "kubectl-tessera_linux_amd64.tar.gz", "platform darwin/arm64"}, nil},
		{"other platforms only", []string{"linux_arm64", "darwin_amd64"}, []string{"platform linux/amd64", "platform darwin/arm64"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FillKrew([]byte(krewTemplate), "v1.2.3", DownloadURL, writeArchives(t, tc.archives...))
			if err == nil {
				t.Fatal("filled without every archive")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("error %q names %q, whose archive is there", err, n)
				}
			}
		})
	}
	if _, err := FillKrew([]byte(krewTemplate), "1.2.3", DownloadURL, writeArchives(t, "linux_amd64", "darwin_arm64")); err == nil || !strings.Contains(err.Error(), "not a release tag") {
		t.Errorf("version without v: %v", err)
	}
}

// writeArchives writes an archive, distinct bytes each, per os_arch.
func writeArchives(t *testing.T, platforms ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range platforms {
		data := []byte(strings.Repeat("archive of "+p+"\n", 1000))
		if err := os.WriteFile(filepath.Join(dir, "kubectl-tessera_"+p+".tar.gz"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sha256sum is coreutils' digest of a file: another implementation than
// the one under test.
func sha256sum(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("sha256sum", path).Output()
	if err != nil {
		t.Fatalf("sha256sum: %v", err)
	}
	sum, _, _ := strings.Cut(string(out), " ")
	return sum
}
