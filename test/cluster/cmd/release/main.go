// Command release checks and fills what a release publishes besides its
// binaries (test/cluster/pkg/release; docs/development.md, Release):
//
//	release check [--dockerfile=F] [--manifest=M --version=vX.Y.Z] [--release-dir=D --version=vX.Y.Z]
//	release sums --release-dir=D
//	release pin-images [--dockerfile=F] [--out=F] [--resolver="crane digest"]
//	release krew --version=vX.Y.Z --dist=DIR [--template=T] [--out=M]
//
// Relative paths are relative to --repo. check prints one line per problem,
// file:line first, and exits 1 when there is any.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-gpu/tessera/internal/fsutil"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/imagebuild"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/release"
)

// resolverEnv overrides --resolver's default: the command that prints an
// image reference's digest.
const resolverEnv = "TESSERA_RELEASE_RESOLVER"

const usage = "usage: release check|pin-images|krew|sums [flags] (release <command> -h lists them)"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr, os.Getenv))
}

// errProblems: the check found problems, already printed.
var errProblems = errors.New("problems found")

func run(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("release "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", ".", "repository root; relative paths are relative to it")
	var cmd func() error
	switch args[0] {
	case "check":
		dockerfile := fs.String("dockerfile", "deployments/Dockerfile", "Dockerfile whose images must be pinned by digest (empty: none)")
		manifest := fs.String("manifest", "", "filled krew manifest to check (needs --version)")
		version := fs.String("version", "", "the release tag the manifest must be for")
		releaseDir := fs.String("release-dir", "", "make release's output to check: its images, chart, krew manifest and SHA256SUMS (needs --version)")
		cmd = func() error {
			if err := check(stderr, *repo, *dockerfile, *manifest, *version); err != nil || *releaseDir == "" {
				return err
			}
			return checkRelease(stderr, inRepo(*repo, *releaseDir), *version)
		}
	case "sums":
		releaseDir := fs.String("release-dir", "_output/release", "make release's output")
		cmd = func() error {
			return release.WriteSums(inRepo(*repo, *releaseDir), artifacts(inRepo(*repo, *releaseDir)))
		}
	case "pin-images":
		dockerfile := fs.String("dockerfile", "deployments/Dockerfile", "Dockerfile to pin")
		out := fs.String("out", "", "where to write the pinned Dockerfile (default: in place)")
		def := "crane digest"
		if v := getenv(resolverEnv); v != "" {
			def = v
		}
		resolver := fs.String("resolver", def, "command printing an image reference's digest, run as `<command> <image>`; default from $"+resolverEnv)
		cmd = func() error { return pinImages(ctx, stderr, *repo, *dockerfile, *out, *resolver) }
	case "krew":
		version := fs.String("version", "", "release tag, e.g. v0.1.0")
		dist := fs.String("dist", "", "directory of the kubectl-tessera_<os>_<arch>.tar.gz archives")
		template := fs.String("template", "deployments/krew/tessera.yaml", "krew manifest template")
		out := fs.String("out", "_output/release/tessera.yaml", "filled manifest to write")
		downloadURL := fs.String("download-url", release.DownloadURL, "URL the release's archives are under, as <url>/<version>/<archive>")
		cmd = func() error { return krew(stderr, *repo, *template, *out, *dist, *version, *downloadURL) }
	default:
		fmt.Fprintf(stderr, "release: unknown command %q\n%s\n", args[0], usage)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "release %s: unexpected arguments %q\n", args[0], fs.Args())
		return 2
	}
	if err := cmd(); err != nil {
		if !errors.Is(err, errProblems) {
			fmt.Fprintf(stderr, "release %s: %v\n", args[0], err)
		}
		return 1
	}
	return 0
}

// inRepo is path relative to the repository unless absolute.
func inRepo(repo, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(repo, path)
}

func check(stderr io.Writer, repo, dockerfile, manifest, version string) error {
	if manifest != "" && version == "" {
		return fmt.Errorf("--manifest %s: --version is required", manifest)
	}
	var problems []release.Problem
	if dockerfile != "" {
		data, err := os.ReadFile(inRepo(repo, dockerfile))
		if err != nil {
			return err
		}
		problems = append(problems, release.CheckDockerfile(dockerfile, string(data))...)
	}
	if manifest != "" {
		data, err := os.ReadFile(inRepo(repo, manifest))
		if err != nil {
			return err
		}
		problems = append(problems, release.CheckKrew(manifest, data, version)...)
	}
	return report(stderr, problems)
}

func report(stderr io.Writer, problems []release.Problem) error {
	for _, p := range problems {
		fmt.Fprintln(stderr, p)
	}
	if len(problems) > 0 {
		return errProblems
	}
	return nil
}

func pinImages(ctx context.Context, stderr io.Writer, repo, dockerfile, out, resolver string) error {
	if out == "" {
		out = dockerfile
	}
	in := inRepo(repo, dockerfile)
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	fi, err := os.Stat(in)
	if err != nil {
		return err
	}
	pinned, err := release.PinImages(ctx, string(data), release.CommandResolver(strings.Fields(resolver)))
	if err != nil {
		return fmt.Errorf("%s: %w", dockerfile, err)
	}
	// What pinning wrote must pass the check it exists for.
	if err := report(stderr, release.CheckDockerfile(out, pinned)); err != nil {
		return err
	}
	return writeFile(inRepo(repo, out), []byte(pinned), fi.Mode().Perm())
}

// writeFile replaces path with data at once: a reader never sees half a
// Dockerfile or manifest.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, data, perm)
}

func krew(stderr io.Writer, repo, template, out, dist, version, downloadURL string) error {
	if version == "" || dist == "" {
		return fmt.Errorf("--version and --dist are required")
	}
	tmpl, err := os.ReadFile(inRepo(repo, template))
	if err != nil {
		return err
	}
	filled, err := release.FillKrew(tmpl, version, downloadURL, inRepo(repo, dist))
	if err != nil {
		return fmt.Errorf("fill %s from %s: %w", template, dist, err)
	}
	path := inRepo(repo, out)
	if err := writeFile(path, filled, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s (kubectl-tessera %s)\n", out, version)
	// The check `make release-check` runs, on the bytes as written.
	written, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return report(stderr, release.CheckKrew(out, written, version))
}

// artifacts are what SHA256SUMS lists of a release directory: the packaged
// chart, the kubectl-tessera archives, the krew manifest, and each image
// layout's index.json (which names every other blob of the layout by its
// digest, and the check verifies those).
func artifacts(dir string) []string {
	var out []string
	for _, pattern := range []string{"*.tgz", "dist/*.tar.gz", "tessera.yaml", "images/*/index.json"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range m {
			rel, _ := filepath.Rel(dir, f)
			out = append(out, rel)
		}
	}
	return out
}

// checkRelease is make release-check on make release's output.
func checkRelease(stderr io.Writer, dir, version string) error {
	if version == "" {
		return fmt.Errorf("--release-dir: --version is required")
	}
	var problems []release.Problem
	chart := filepath.Join(dir, "tessera-"+release.ChartVersion(version)+".tgz")
	problems = append(problems, release.CheckChart(chart, version)...)
	manifest := filepath.Join(dir, "tessera.yaml")
	if data, err := os.ReadFile(manifest); err != nil {
		problems = append(problems, release.Problem{File: manifest, Line: 1, Msg: err.Error()})
	} else {
		problems = append(problems, release.CheckKrew(manifest, data, version)...)
	}
	for _, im := range imagebuild.Images() {
		layout := filepath.Join(dir, "images", im.Name)
		for _, msg := range imagebuild.CheckLayout(layout, version, imagebuild.Platforms) {
			problems = append(problems, release.Problem{File: filepath.Join(layout, "index.json"), Line: 1, Msg: msg})
		}
	}
	want := []string{filepath.Base(chart), "tessera.yaml"}
	for _, im := range imagebuild.Images() {
		want = append(want, "images/"+im.Name+"/index.json")
	}
	problems = append(problems, release.CheckSums(dir, want)...)
	if err := report(stderr, problems); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: release %s checked: chart, krew manifest, %d images, %s\n", dir, version, len(imagebuild.Images()), release.SumsFile)
	return nil
}
