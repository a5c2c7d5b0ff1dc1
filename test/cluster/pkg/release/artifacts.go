package release

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SumsFile is the release's checksum list, in sha256sum's format.
const SumsFile = "SHA256SUMS"

// ChartVersion is the chart version of a release tag: v0.1.0 is 0.1.0.
func ChartVersion(version string) string { return strings.TrimPrefix(version, "v") }

// CheckChart reads the packaged chart at file (helm package's .tgz) and
// refuses a Chart.yaml whose version is not ChartVersion(version) or whose
// appVersion is not version (the images' tag the chart defaults to).
func CheckChart(file, version string) []Problem {
	bad := func(format string, args ...any) []Problem {
		return []Problem{{File: file, Line: 1, Msg: fmt.Sprintf(format, args...)}}
	}
	f, err := os.Open(file)
	if err != nil {
		return bad("%v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return bad("not a gzip'd chart: %v", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return bad("no Chart.yaml")
		}
		if err != nil {
			return bad("%v", err)
		}
		if path.Base(h.Name) != "Chart.yaml" || strings.Count(strings.Trim(h.Name, "/"), "/") != 1 {
			continue
		}
		var c struct {
			Name       string `yaml:"name"`
			Version    string `yaml:"version"`
			AppVersion string `yaml:"appVersion"`
		}
		if err := yaml.NewDecoder(tr).Decode(&c); err != nil {
			return bad("%s: %v", h.Name, err)
		}
		var out []Problem
		if c.Version != ChartVersion(version) {
			out = append(out, bad("%s: version %q, want %q", h.Name, c.Version, ChartVersion(version))...)
		}
		if c.AppVersion != version {
			out = append(out, bad("%s: appVersion %q, want %q", h.Name, c.AppVersion, version)...)
		}
		if want := c.Name + "-" + ChartVersion(version) + ".tgz"; filepath.Base(file) != want {
			out = append(out, bad("named %s, want %s", filepath.Base(file), want)...)
		}
		return out
	}
}

// WriteSums writes dir/SHA256SUMS over files (paths relative to dir),
// sorted, as `sha256sum -c` reads it.
func WriteSums(dir string, files []string) error {
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		sum, err := sha256File(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}

// CheckSums refuses a SHA256SUMS line whose file is missing or whose sum
// differs, and any of want (paths relative to dir) it does not list.
func CheckSums(dir string, want []string) []Problem {
	file := filepath.Join(dir, SumsFile)
	f, err := os.Open(file)
	if err != nil {
		return []Problem{{File: file, Line: 1, Msg: err.Error()}}
	}
	defer f.Close()
	var out []Problem
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			out = append(out, Problem{File: file, Line: n, Msg: fmt.Sprintf("not `<sha256>  <file>`: %q", sc.Text())})
			continue
		}
		listed[name] = true
		got, err := sha256File(filepath.Join(dir, name))
		if err != nil {
			out = append(out, Problem{File: file, Line: n, Msg: err.Error()})
		} else if got != sum {
			out = append(out, Problem{File: file, Line: n, Msg: fmt.Sprintf("%s: sha256 %s, listed %s", name, got, sum)})
		}
	}
	for _, w := range want {
		if !listed[w] {
			out = append(out, Problem{File: file, Line: 1, Msg: fmt.Sprintf("does not list %s", w)})
		}
	}
	return out
}

func sha256File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
