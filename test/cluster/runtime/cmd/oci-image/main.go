// Command oci-image builds a single-layer OCI image from files of this
// machine and writes it as an image archive that `ctr images import` takes:
// the local cluster's containerd nodes run images built this way, without
// Docker or a registry.
//
//	oci-image --ref tessera.local/probe:dev --out probe.tar \
//	    --add bin/probe=/usr/bin/probe --entrypoint /usr/bin/probe
//
// --add HOST=IMAGE copies a file (following links); when the file is a
// dynamically linked ELF program, its interpreter and every shared library
// it needs are added too, at the paths the host resolves them to, so a cgo
// binary runs on an otherwise empty image.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type adds []string

func (a *adds) String() string     { return strings.Join(*a, ",") }
func (a *adds) Set(s string) error { *a = append(*a, s); return nil }

func main() {
	var files adds
	ref := flag.String("ref", "", "image reference, e.g. tessera.local/probe:dev")
	out := flag.String("out", "", "image archive to write")
	entrypoint := flag.String("entrypoint", "", "entrypoint, words separated by spaces")
	flag.Var(&files, "add", "HOST=IMAGE: a file to add (repeatable)")
	flag.Parse()
	if err := build(*ref, *out, *entrypoint, files); err != nil {
		fmt.Fprintln(os.Stderr, "oci-image:", err)
		os.Exit(1)
	}
}

func build(ref, out, entrypoint string, files []string) error {
	if ref == "" || out == "" || len(files) == 0 {
		return fmt.Errorf("--ref, --out and at least one --add are required")
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("--ref %q: %w", ref, err)
	}
	var l layout
	for _, f := range files {
		host, image, ok := strings.Cut(f, "=")
		if !ok || host == "" || !strings.HasPrefix(image, "/") {
			return fmt.Errorf("--add %q: want HOST=/absolute/image/path", f)
		}
		if err := l.addProgram(host, image); err != nil {
			return err
		}
	}
	layer, err := l.layer()
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{
		Entrypoint: strings.Fields(entrypoint),
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}
