package release

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The krew manifest's fields this package reads and fills.
const (
	krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	// DownloadURL is where a release's archives are published: the
	// manifest's URIs are DownloadURL/<version>/<archive>.
	DownloadURL = "https://github.com/tessera-gpu/tessera/releases/download"
)

// placeholders are the words the committed manifest marks what a release
// fills with; none may be left in a filled one.
var placeholders = []string{"PLACEHOLDER", "RELEASE-VERSION", "RELEASE-PROCESS"}

// versionRE is a release tag as krew wants spec.version: v and semver.
var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ArchiveName is the release archive of kubectl-tessera for a platform.
func ArchiveName(goos, goarch string) string {
	return "kubectl-tessera_" + goos + "_" + goarch + ".tar.gz"
}

func checkVersion(v string) error {
	if !versionRE.MatchString(v) {
		return fmt.Errorf("version %q is not a release tag (v<major>.<minor>.<patch>)", v)
	}
	return nil
}

// platform is one entry of spec.platforms.
type platform struct {
	os, arch string
	node     *yaml.Node // the entry's mapping
}

// manifest is a parsed krew manifest: its document and spec.
type manifest struct {
	doc, root, spec *yaml.Node
	platforms       []platform
}

// parseManifest reads the fields a check or a fill needs, saying at which
// line one is missing.
func parseManifest(data []byte) (*manifest, []lineError) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, []lineError{{1, err}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, []lineError{{1, fmt.Errorf("not a YAML mapping")}}
	}
	m := &manifest{doc: &doc, root: doc.Content[0]}
	var errs []lineError
	bad := func(n *yaml.Node, format string, a ...any) {
		errs = append(errs, lineError{n.Line, fmt.Errorf(format, a...)})
	}
	if v := value(m.root, "apiVersion"); v == nil || v.Value != krewAPIVersion {
		bad(m.root, "apiVersion: want %s", krewAPIVersion)
	}
	if v := value(m.root, "kind"); v == nil || v.Value != "Plugin" {
		bad(m.root, "kind: want Plugin")
	}
	if m.spec = value(m.root, "spec"); m.spec == nil || m.spec.Kind != yaml.MappingNode {
		bad(m.root, "spec: missing")
		return nil, errs
	}
	ps := value(m.spec, "platforms")
	if ps == nil || ps.Kind != yaml.SequenceNode || len(ps.Content) == 0 {
		bad(m.spec, "spec.platforms: none")
		return nil, errs
	}
	seen := map[string]bool{}
	for i, p := range ps.Content {
		labels := value(value(p, "selector"), "matchLabels")
		goos, goarch := value(labels, "os"), value(labels, "arch")
		if goos == nil || goarch == nil || goos.Value == "" || goarch.Value == "" {
			bad(p, "spec.platforms[%d].selector.matchLabels: want os and arch", i)
			continue
		}
		key := goos.Value + "/" + goarch.Value
		if seen[key] {
			bad(p, "spec.platforms[%d]: %s listed twice", i, key)
		}
		seen[key] = true
		m.platforms = append(m.platforms, platform{os: goos.Value, arch: goarch.Value, node: p})
	}
	return m, errs
}

// lineError is an error at a line of the manifest.
type lineError struct {
	line int
	err  error
}

// value is the value of key in mapping m; nil when m is not a mapping or
// has no such key.
func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// CheckKrew lists what makes the krew manifest at file (content data) unfit
// to publish for version: a placeholder left, a spec.version other than
// version, a platform whose uri is not version's https archive of that
// platform or whose sha256 is not 64 hex digits.
func CheckKrew(file string, data []byte, version string) []Problem {
	out := checkKrew(file, data, version)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

func checkKrew(file string, data []byte, version string) []Problem {
	var out []Problem
	add := func(line int, format string, a ...any) {
		out = append(out, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, a...)})
	}
	for i, line := range splitLines(string(data)) {
		for _, p := range placeholders {
			if strings.Contains(line, p) {
				add(i+1, "placeholder %s left: %s", p, strings.TrimSpace(line))
				break
			}
		}
	}
	if err := checkVersion(version); err != nil {
		add(1, "%v", err)
	}
	m, errs := parseManifest(data)
	for _, e := range errs {
		add(e.line, "%v", e.err)
	}
	if m == nil {
		return out
	}
	switch v := value(m.spec, "version"); {
	case v == nil:
		add(m.spec.Line, "spec.version: missing")
	case v.Value != version:
		add(v.Line, "spec.version %q, want %q", v.Value, version)
	}
	for _, p := range m.platforms {
		name := p.os + "/" + p.arch
		if u := value(p.node, "uri"); u == nil {
			add(p.node.Line, "platform %s: uri missing", name)
		} else if err := checkURI(u.Value, version, ArchiveName(p.os, p.arch)); err != nil {
			add(u.Line, "platform %s: uri %q: %v", name, u.Value, err)
		}
		if s := value(p.node, "sha256"); s == nil {
			add(p.node.Line, "platform %s: sha256 missing", name)
		} else if !sha256RE.MatchString(s.Value) {
			add(s.Line, "platform %s: sha256 %q: want 64 lower-case hex digits", name, s.Value)
		}
	}
	return out
}

// checkURI: an https URL whose path ends in /<version>/<archive>, the
// release's archive of the platform.
func checkURI(raw, version, archive string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("want an https URL without query or fragment")
	}
	if want := "/" + version + "/" + archive; !strings.HasSuffix(u.Path, want) {
		return fmt.Errorf("want a path ending in %s", want)
	}
	return nil
}
