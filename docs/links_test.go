// Package docs holds the project's documentation pages; its test keeps
// their links true.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is the front page a newcomer reads in minutes; the rest
// belongs in docs/.
const readmeMaxLines = 250

var (
	// [text](target) and ![alt](target); the target ends at a space or ')'.
	linkRE  = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	fenceRE = regexp.MustCompile("^\\s*(```|~~~)")
	codeRE  = regexp.MustCompile("`[^`]*`")
)

// markdownFiles lists the repository's Markdown files, relative to root,
// skipping build output.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "_output" || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// prose returns the file's lines outside fenced code blocks, with inline
// code removed (a link inside code is an example, not a link).
func prose(data string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(data, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			out = append(out, "")
			continue
		}
		if inFence {
			out = append(out, "")
			continue
		}
		out = append(out, codeRE.ReplaceAllString(line, ""))
	}
	return out
}

// anchors are the heading IDs GitHub gives a Markdown file: lower case,
// punctuation dropped, spaces as hyphens, repeats numbered.
func anchors(data string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(data, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' || r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

// TestLinksResolve checks every relative link of every Markdown file in the
// repository: the file or directory exists, and a #fragment names a
// heading of the Markdown file it points into. Web links are not fetched.
func TestLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	if len(files) < 5 {
		t.Fatalf("found %d Markdown files under %s; the walk is broken", len(files), root)
	}
	heads := map[string]map[string]bool{}
	headsOf := func(p string) (map[string]bool, error) {
		if h, ok := heads[p]; ok {
			return h, nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		heads[p] = anchors(string(data))
		return heads[p], nil
	}
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range prose(string(data)) {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				dest := filepath.Join(root, f)
				if path != "" {
					dest = filepath.Join(filepath.Dir(dest), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", f, i+1, target, path)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: a fragment into a file that is not Markdown", f, i+1, target)
					continue
				}
				h, err := headsOf(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", f, i+1, target, err)
					continue
				}
				if !h[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", f, i+1, target, path, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link checked; the link pattern is broken")
	}
}

func TestAnchors(t *testing.T) {
	got := anchors("# Tessera\n## Real containers: `RUNTIME=containerd`\n```\n# not a heading\n```\n## GPU shares: memory and compute as capacity\n## Two\n## Two\n")
	for _, want := range []string{"tessera", "real-containers-runtimecontainerd", "gpu-shares-memory-and-compute-as-capacity", "two", "two-1"} {
		if !got[want] {
			t.Errorf("anchors lack %q: %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block counted as a heading")
	}
}

// TestREADMEIsShort keeps the front page a front page.
func TestREADMEIsShort(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines; keep it under %d and move the detail to docs/", n, readmeMaxLines)
	}
}
