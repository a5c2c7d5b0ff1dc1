package release

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/distribution/reference"
)

// imageUse is one place a Dockerfile names an image to pull: a FROM, or a
// COPY --from that is not a stage.
type imageUse struct {
	what  string // "FROM", "COPY --from"
	line  int    // the instruction's first line
	word  word   // the image as written, ARGs unexpanded
	image string // with the ARGs' defaults
	err   error  // why it could not be expanded
}

// imageUses lists the images a Dockerfile pulls. Stage references (FROM
// build, COPY --from=build or --from=0) and scratch pull nothing and are
// left out: only what comes from a registry needs a digest.
func imageUses(data string) []imageUse {
	var (
		out     []imageUse
		global  = args{}
		stage   args // nil before the first FROM
		stages  = map[string]bool{}
		nStages int
	)
	isStage := func(image string) bool {
		return stages[strings.ToLower(image)] || strings.EqualFold(image, "scratch")
	}
	ins, escape := parseDockerfile(data)
	for _, in := range ins {
		switch in.cmd {
		case "ARG":
			if stage == nil {
				global.declare(in.words, nil)
			} else {
				stage.declare(in.words, global)
			}
		case "FROM":
			w, name, ok := fromImage(in.words)
			if !ok {
				out = append(out, imageUse{what: "FROM", line: in.line, err: fmt.Errorf("names no image")})
				continue
			}
			image, err := global.expand(w.text, escape)
			if err != nil || !isStage(image) {
				out = append(out, imageUse{what: "FROM", line: in.line, word: w, image: image, err: err})
			}
			if name != "" {
				stages[strings.ToLower(name)] = true
			}
			nStages++
			stage = args{}
		case "COPY":
			for _, w := range in.words {
				v, ok := strings.CutPrefix(w.text, "--from=")
				if !ok {
					continue
				}
				scope := args{}
				for k, val := range global {
					scope[k] = val
				}
				for k, val := range stage {
					scope[k] = val
				}
				image, err := scope.expand(v, escape)
				if n, nerr := strconv.Atoi(image); err == nil && nerr == nil && n >= 0 && n < nStages {
					continue // a stage by its index
				}
				if err != nil || !isStage(image) {
					w.text, w.col = v, w.col+len("--from=")
					out = append(out, imageUse{what: "COPY --from", line: in.line, word: w, image: image, err: err})
				}
			}
		}
	}
	return out
}

// fromImage is the image word of FROM [--platform=...] image [AS name].
func fromImage(words []word) (image word, name string, ok bool) {
	for len(words) > 0 && strings.HasPrefix(words[0].text, "--") {
		words = words[1:]
	}
	if len(words) == 0 {
		return word{}, "", false
	}
	if len(words) >= 3 && strings.EqualFold(words[1].text, "AS") {
		name = words[2].text
	}
	return words[0], name, true
}

// pinned says why an image reference is not name[:tag]@sha256:<64 hex>.
func pinned(image string) error {
	ref, err := reference.Parse(image)
	if err != nil {
		return fmt.Errorf("not an image reference: %w", err)
	}
	d, ok := ref.(reference.Digested)
	if !ok {
		return fmt.Errorf("not pinned by digest")
	}
	if d.Digest().Algorithm() != "sha256" {
		return fmt.Errorf("pinned by %s, want sha256", d.Digest().Algorithm())
	}
	return nil
}
