package release

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// DockerImage is what a Dockerfile stage makes of an image, as far as the
// Dockerfile itself says (not its registry base's content): the entrypoint
// and user it ends with, and the files it copies in, all inherited through
// FROM <stage>.
type DockerImage struct {
	Base       string   // the registry image at the bottom of its FROM chain
	Entrypoint []string // exec form
	User       string
	Files      []string // absolute paths COPY writes, sorted
}

// DockerfileImages describes every named stage of a Dockerfile. COPY
// destinations ending in / take the source's base name; ENTRYPOINT must be
// in exec (JSON) form.
func DockerfileImages(data string) (map[string]DockerImage, error) {
	ins, _ := parseDockerfile(data)
	stages := map[string]DockerImage{}
	var cur *DockerImage
	var name string
	save := func() {
		if cur != nil && name != "" {
			sort.Strings(cur.Files)
			stages[name] = *cur
		}
	}
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			save()
			w, n, ok := fromImage(in.words)
			if !ok {
				return nil, fmt.Errorf("line %d: FROM names no image", in.line)
			}
			name = strings.ToLower(n)
			next := DockerImage{Base: w.text}
			if parent, ok := stages[strings.ToLower(w.text)]; ok {
				next = parent
				next.Files = append([]string(nil), parent.Files...)
			}
			cur = &next
		case "USER":
			if cur != nil && len(in.words) > 0 {
				cur.User = in.words[0].text
			}
		case "ENTRYPOINT":
			var words []string
			var text []string
			for _, w := range in.words {
				text = append(text, w.text)
			}
			if err := json.Unmarshal([]byte(strings.Join(text, " ")), &words); err != nil {
				return nil, fmt.Errorf("line %d: ENTRYPOINT not in exec form: %w", in.line, err)
			}
			if cur != nil {
				cur.Entrypoint = words
			}
		case "COPY":
			var srcs []string
			for _, w := range in.words {
				if !strings.HasPrefix(w.text, "--") {
					srcs = append(srcs, w.text)
				}
			}
			if len(srcs) < 2 || cur == nil {
				continue
			}
			dst := srcs[len(srcs)-1]
			for _, s := range srcs[:len(srcs)-1] {
				p := dst
				if strings.HasSuffix(dst, "/") {
					p = path.Join(dst, path.Base(s))
				}
				cur.Files = append(cur.Files, p)
			}
		}
	}
	save()
	return stages, nil
}
