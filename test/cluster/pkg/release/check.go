package release

import "fmt"

// CheckDockerfile lists every image the Dockerfile at file (its content
// data) pulls without a sha256 digest, judged after its ARGs' defaults are
// substituted: a tag can be moved to other bytes, a digest cannot.
func CheckDockerfile(file, data string) []Problem {
	var out []Problem
	for _, u := range imageUses(data) {
		if p, bad := u.problem(); bad {
			out = append(out, Problem{File: file, Line: u.line, Msg: p})
		}
	}
	return out
}

func (u imageUse) problem() (string, bool) {
	if u.err != nil {
		return fmt.Sprintf("%s %s: %v", u.what, u.word.text, u.err), true
	}
	err := pinned(u.image)
	if err == nil {
		return "", false
	}
	as := u.image
	if u.word.text != u.image {
		as = fmt.Sprintf("%s (%s)", u.image, u.word.text)
	}
	return fmt.Sprintf("%s %s: %v: want name[:tag]@sha256:<64 hex> (make release-pin-images)", u.what, as, err), true
}
