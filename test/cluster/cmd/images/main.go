// Command images builds Tessera's production images without a Docker
// daemon (test/cluster/pkg/imagebuild) and writes each as an OCI image
// layout, <out>/<image>/, with an index of the platforms asked for:
//
//	images --repo=.. --version=v0.1.0 --commit=$(git rev-parse HEAD) \
//	    --date=2026-12-01T00:00:00Z [--platforms=linux/amd64,linux/arm64] [--out=_output/images]
//
// `make images` (amd64 only) and `make release` run it. It prints each
// image's index digest and, per platform, its manifest digest and the bytes
// of its compressed layers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", ".", "the repository root (the module the binaries are built in); relative paths are relative to it")
	out := fs.String("out", "_output/images", "where each image's OCI layout goes, as <out>/<image>/")
	work := fs.String("work", "_output/image-bin", "where the binaries are built, <work>/<os>_<arch>/")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "platforms of every image's index")
	only := fs.String("images", "", "comma-separated image names (default: all of them)")
	version := fs.String("version", "", "the version stamped into the binaries and labels, and the images' tag")
	commit := fs.String("commit", "", "the commit stamped into the binaries and labels")
	date := fs.String("date", "", "RFC 3339 build date: the binaries' build date, the images' creation time and every file's mtime")
	registry := fs.String("registry", "ghcr.io/tessera-gpu", "registry and namespace of the images' references (index.json's io.containerd.image.name)")
	source := fs.String("source", "https://github.com/tessera-gpu/tessera", "org.opencontainers.image.source")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || *commit == "" || *date == "" {
		return fmt.Errorf("--version, --commit and --date are required")
	}
	created, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return fmt.Errorf("--date: %w", err)
	}
	plats, err := imagebuild.ParsePlatforms(*platforms)
	if err != nil {
		return err
	}
	var ims []imagebuild.Image
	if *only == "" {
		ims = imagebuild.Images()
	} else {
		for _, n := range strings.Split(*only, ",") {
			im, ok := imagebuild.Lookup(n)
			if !ok {
				return fmt.Errorf("--images: no image %q", n)
			}
			ims = append(ims, im)
		}
	}
	if *repo, err = filepath.Abs(*repo); err != nil {
		return err
	}
	inRepo := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(*repo, p)
	}
	o := imagebuild.Options{ModuleDir: *repo, WorkDir: inRepo(*work), Version: *version, Commit: *commit,
		Created: created, Source: *source, Log: stderr}
	var bins []imagebuild.Binary
	for _, im := range ims {
		bins = append(bins, im.Binaries()...)
	}
	start := time.Now()
	if err := imagebuild.BuildBinaries(ctx, o, plats, bins); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tPLATFORM\tMANIFEST\tLAYER BYTES (gzip)")
	for _, im := range ims {
		idx, err := im.Build(o, plats)
		if err != nil {
			return err
		}
		dir := filepath.Join(inRepo(*out), im.Name)
		ref := *registry + "/" + im.Name + ":" + *version
		if err := imagebuild.WriteLayout(dir, idx, *version, ref); err != nil {
			return err
		}
		desc, sizes, err := imagebuild.ReadLayout(dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\tindex\t%s\t%s\n", ref, desc.Digest, filepath.Join(*out, im.Name))
		for _, s := range sizes {
			fmt.Fprintf(tw, "\t%s\t%s\t%d (%.1f MiB)\n", s.Platform, s.Digest, s.LayerBytes, float64(s.LayerBytes)/(1<<20))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "images: %d images for %s in %s\n", len(ims), *platforms, time.Since(start).Round(time.Second))
	return nil
}
