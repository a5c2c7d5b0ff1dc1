package release

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"

	"github.com/distribution/reference"
)

// Resolver gives the digest (sha256:<64 hex>) an image reference names now.
type Resolver func(ctx context.Context, image string) (string, error)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// CommandResolver runs argv with the image reference added (`crane digest
// IMAGE`) and takes the digest it prints.
func CommandResolver(argv []string) Resolver {
	return func(ctx context.Context, image string) (string, error) {
		if len(argv) == 0 {
			return "", fmt.Errorf("resolve %s: no resolver command", image)
		}
		cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], image)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("resolve %s: %s: %w: %s", image, strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		d := strings.TrimSpace(string(out))
		if !digestRE.MatchString(d) {
			return "", fmt.Errorf("resolve %s: %s printed %q, want sha256:<64 hex>", image, strings.Join(argv, " "), d)
		}
		return d, nil
	}
}

// PinImages rewrites every image the Dockerfile pulls as the same words
// with @<digest> of what resolve says the image names now, a digest already
// there replaced: pinning again after a base image's release moves the pin.
// ARG substitutions stay as written (the digest is of their defaults), and
// every other byte of the file stays as it was.
func PinImages(ctx context.Context, data string, resolve Resolver) (string, error) {
	type edit struct {
		col, n int
		text   string
	}
	edits := map[int][]edit{} // by line
	digests := map[string]string{}
	for _, u := range imageUses(data) {
		if u.err != nil {
			return "", fmt.Errorf("line %d: %s %s: %w", u.line, u.what, u.word.text, u.err)
		}
		ref, err := reference.Parse(u.image)
		if err != nil {
			return "", fmt.Errorf("line %d: %s %s: not an image reference: %w", u.line, u.what, u.image, err)
		}
		named, ok := ref.(reference.Named)
		if !ok {
			return "", fmt.Errorf("line %d: %s %s: no image name", u.line, u.what, u.image)
		}
		image := named.Name()
		if t, ok := ref.(reference.Tagged); ok {
			image += ":" + t.Tag()
		}
		written := u.word.text
		if at := strings.LastIndexByte(written, '@'); at >= 0 {
			if strings.Contains(written[at:], "$") {
				return "", fmt.Errorf("line %d: %s %s: the digest comes from an ARG; pin its default instead", u.line, u.what, written)
			}
			written = written[:at]
		}
		d, ok := digests[image]
		if !ok {
			if d, err = resolve(ctx, image); err != nil {
				return "", fmt.Errorf("line %d: %w", u.line, err)
			}
			if !digestRE.MatchString(d) {
				return "", fmt.Errorf("line %d: resolve %s: digest %q, want sha256:<64 hex>", u.line, image, d)
			}
			digests[image] = d
		}
		edits[u.word.line] = append(edits[u.word.line], edit{u.word.col, len(u.word.text), written + "@" + d})
	}
	lines := splitLines(data)
	for n, es := range edits {
		// Right to left, so that each edit's column still holds.
		sort.Slice(es, func(i, j int) bool { return es[i].col > es[j].col })
		line := lines[n-1]
		for _, e := range es {
			line = line[:e.col] + e.text + line[e.col+e.n:]
		}
		lines[n-1] = line
	}
	return strings.Join(lines, ""), nil
}
