package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FillKrew is the krew manifest template filled for version: spec.version,
// and for each platform the uri of its archive under downloadURL/version
// and the sha256 of the archive of that name in dist, read from the file.
// Every platform must have its archive; the errors name each one missing.
// The template's placeholder comments are dropped.
func FillKrew(template []byte, version, downloadURL, dist string) ([]byte, error) {
	if err := checkVersion(version); err != nil {
		return nil, err
	}
	m, errs := parseManifest(template)
	if len(errs) > 0 {
		var all []error
		for _, e := range errs {
			all = append(all, fmt.Errorf("line %d: %w", e.line, e.err))
		}
		return nil, fmt.Errorf("krew manifest template: %w", errors.Join(all...))
	}
	setScalar(m.spec, "version", version)
	var missing []error
	for _, p := range m.platforms {
		archive := ArchiveName(p.os, p.arch)
		sum, err := fileSHA256(filepath.Join(dist, archive))
		if err != nil {
			missing = append(missing, fmt.Errorf("platform %s/%s: %w", p.os, p.arch, err))
			continue
		}
		setScalar(p.node, "uri", strings.TrimSuffix(downloadURL, "/")+"/"+version+"/"+archive)
		setScalar(p.node, "sha256", sum)
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	dropPlaceholderComments(m.doc)
	m.doc.HeadComment = fmt.Sprintf("krew plugin manifest for kubectl-tessera %s, filled by `make release-krew`\nfrom deployments/krew/tessera.yaml: `kubectl krew install --manifest=` this file.", version)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m.doc); err != nil {
		return nil, fmt.Errorf("encode krew manifest: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode krew manifest: %w", err)
	}
	return b.Bytes(), nil
}

// setScalar sets key's value in mapping m (which parseManifest found)
// to a double-quoted string when it has one, so that a digest of digits
// alone stays a string, else plain.
func setScalar(m *yaml.Node, key, v string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		n := m.Content[i+1]
		style := n.Style & yaml.DoubleQuotedStyle
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Style: style, Line: n.Line, Column: n.Column}
		return
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v})
}

// dropPlaceholderComments removes every comment that speaks of a
// placeholder: in the filled manifest there is none left.
func dropPlaceholderComments(n *yaml.Node) {
	for _, c := range []*string{&n.HeadComment, &n.LineComment, &n.FootComment} {
		for _, p := range placeholders {
			if strings.Contains(*c, p) {
				*c = ""
				break
			}
		}
	}
	for _, k := range n.Content {
		dropPlaceholderComments(k)
	}
}

// fileSHA256 is the hex sha256 of a file's bytes.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("archive: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
