package release

import (
	"strings"
)

// instruction is one Dockerfile instruction, its continuation lines joined
// but each word kept where it stands, so that a fill can rewrite one word
// and leave the rest of the file as it was.
type instruction struct {
	cmd   string // upper case: FROM, ARG, COPY...
	line  int    // 1-based, of its first line
	words []word // after the keyword
}

// word is one whitespace-separated word and where it stands.
type word struct {
	text string
	line int // 1-based
	col  int // byte offset in its line
}

// parseDockerfile splits a Dockerfile into instructions as BuildKit reads
// them, and says its escape character: parser directives (only escape
// matters here), comment lines
// dropped (also inside a continuation), lines ending in the escape
// character continued, and heredoc bodies (RUN <<EOF) skipped, so that a
// FROM inside a script is not taken for an instruction.
func parseDockerfile(data string) (ins []instruction, escape byte) {
	lines := splitLines(data)
	escape = '\\'
	i := 0
	for ; i < len(lines); i++ {
		key, value, ok := directive(lines[i])
		if !ok {
			break
		}
		if key == "escape" && (value == "`" || value == "\\") {
			escape = value[0]
		}
	}
	for i < len(lines) {
		text := strings.TrimRight(lines[i], " \t\r\n")
		if t := strings.TrimLeft(text, " \t"); t == "" || t[0] == '#' {
			i++
			continue
		}
		in := instruction{line: i + 1}
		for ; i < len(lines); i++ {
			text = strings.TrimRight(lines[i], " \t\r\n")
			if t := strings.TrimLeft(text, " \t"); (t == "" || t[0] == '#') && len(in.words) > 0 {
				continue // a comment or blank line inside a continuation
			}
			cont := strings.HasSuffix(text, string(escape))
			if cont {
				text = text[:len(text)-1]
			}
			in.words = append(in.words, splitWords(text, i+1)...)
			if !cont {
				i++
				break
			}
		}
		if len(in.words) == 0 {
			continue
		}
		in.cmd = strings.ToUpper(in.words[0].text)
		in.words = in.words[1:]
		ins = append(ins, in)
		i = skipHeredocs(lines, i, in.words)
	}
	return ins, escape
}

// directive is a parser directive line, `# key=value`.
func directive(line string) (key, value string, ok bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "#") {
		return "", "", false
	}
	key, value, ok = strings.Cut(strings.TrimSpace(t[1:]), "=")
	key = strings.ToLower(strings.TrimSpace(key))
	if !ok || key == "" || strings.ContainsAny(key, " \t") {
		return "", "", false
	}
	return key, strings.TrimSpace(value), true
}

// skipHeredocs returns the line after the bodies of the heredocs words
// open (<<EOF, <<-EOF, <<"EOF"), each ending at a line of its word alone.
func skipHeredocs(lines []string, i int, words []word) int {
	for _, w := range words {
		at := strings.Index(w.text, "<<")
		if at < 0 {
			continue
		}
		name := strings.TrimPrefix(w.text[at+2:], "-")
		name = strings.Trim(name, `"'`)
		if name == "" {
			continue
		}
		for i < len(lines) {
			end := strings.TrimSpace(lines[i]) == name
			i++
			if end {
				break
			}
		}
	}
	return i
}

// splitLines splits after each newline, keeping it, so that joining the
// parts gives the input back.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func splitWords(s string, line int) []word {
	var out []word
	start := -1
	for i := 0; i <= len(s); i++ {
		space := i == len(s) || s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'
		switch {
		case space && start >= 0:
			out = append(out, word{text: s[start:i], line: line, col: start})
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	return out
}
