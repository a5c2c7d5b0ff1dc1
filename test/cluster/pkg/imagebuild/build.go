package imagebuild

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// VersionPackage is the package whose variables -ldflags -X stamps.
const VersionPackage = "github.com/tessera-gpu/tessera/internal/version"

// Options are what a build of the images needs.
type Options struct {
	// ModuleDir is the directory `go build` runs in (the repository root
	// for Images' binaries).
	ModuleDir string
	// WorkDir holds the built binaries, WorkDir/<os>_<arch>/<name>.
	WorkDir string
	Go      string // the go command; "go" when empty
	// Version, Commit and Created are stamped into the binaries (internal/version)
	// and the images' labels; Created is also every file's mtime and the
	// images' creation time, so the same commit gives the same digests.
	Version, Commit string
	Created         time.Time
	Source          string // org.opencontainers.image.source
	// CC is the C compiler per architecture for cgo builds; Debian's cross
	// compiler (aarch64-linux-gnu-gcc) for another machine's when unset.
	CC  map[string]string
	Log io.Writer // progress lines; none when nil
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// ldflags strip the binaries and stamp their version.
func (o Options) ldflags() string {
	return fmt.Sprintf("-s -w -X %[1]s.version=%[2]s -X %[1]s.commit=%[3]s -X %[1]s.buildDate=%[4]s",
		VersionPackage, o.Version, o.Commit, o.Created.UTC().Format(time.RFC3339))
}

// binPath is where BuildBinaries puts b for p.
func (o Options) binPath(p Platform, b Binary) string {
	return filepath.Join(o.WorkDir, p.OS+"_"+p.Arch, b.Name)
}

// BuildBinaries compiles each binary for each platform into WorkDir:
// -trimpath, stripped, version stamped; CGO_ENABLED=0 unless Binary.Cgo,
// and then with the platform's C compiler.
func BuildBinaries(ctx context.Context, o Options, platforms []Platform, bins []Binary) error {
	gocmd := o.Go
	if gocmd == "" {
		gocmd = "go"
	}
	for _, p := range platforms {
		for _, cgo := range []bool{false, true} {
			var pkgs []string
			for _, b := range bins {
				if b.Cgo == cgo && !slices.Contains(pkgs, b.Package) {
					pkgs = append(pkgs, b.Package)
				}
			}
			if len(pkgs) == 0 {
				continue
			}
			dir, err := filepath.Abs(filepath.Dir(o.binPath(p, Binary{Name: "x"})))
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			env := append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0")
			if cgo {
				env[len(env)-1] = "CGO_ENABLED=1"
				cc := o.CC[p.Arch]
				if cc == "" && !native(p.Arch) {
					cc = glibcArches[p.Arch].crossCC
				}
				if cc != "" {
					if _, err := exec.LookPath(cc); err != nil {
						return fmt.Errorf("cgo for %s needs the C compiler %s (Debian: apt-get install --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross): %w", p, cc, err)
					}
					env = append(env, "CC="+cc)
				}
			}
			start := time.Now()
			args := append([]string{"build", "-trimpath", "-ldflags=" + o.ldflags(), "-o", dir + "/"}, pkgs...)
			cmd := exec.CommandContext(ctx, gocmd, args...)
			cmd.Dir, cmd.Env = o.ModuleDir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build %s for %s (cgo %v): %w\n%s", strings.Join(pkgs, " "), p, cgo, err, out)
			}
			o.logf("built %s for %s (cgo %v) in %s", strings.Join(pkgs, " "), p, cgo, time.Since(start).Round(time.Second))
		}
	}
	return nil
}

// Build assembles im for each platform from the binaries BuildBinaries
// wrote, as an OCI image index of one OCI image per platform.
func (im Image) Build(o Options, platforms []Platform) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := im.image(o, p)
		if err != nil {
			return nil, fmt.Errorf("%s for %s: %w", im.Name, p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: p.OS, Architecture: p.Arch},
		}})
	}
	return mutate.Annotations(idx, o.annotations(im)).(v1.ImageIndex), nil
}

// annotations are the OCI labels of im, on its index and in each config.
func (o Options) annotations(im Image) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       im.Name,
		"org.opencontainers.image.description": im.Description,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Commit,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

func (im Image) image(o Options, p Platform) (v1.Image, error) {
	created := v1.Time{Time: o.Created.UTC()}
	base, baseHow, err := baseFiles(im.Base, p, im.Binaries(), func(b Binary) string { return o.binPath(p, b) })
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	layers := []struct {
		f   files
		how string
	}{{base, baseHow}}
	for _, l := range im.Layers {
		f := files{}
		var names []string
		for _, b := range l.Binaries {
			data, err := os.ReadFile(o.binPath(p, b))
			if err != nil {
				return nil, err
			}
			f.file(b.Path(), 0o755, data)
			names = append(names, b.Name)
		}
		how := fmt.Sprintf("COPY %s %s/ # go build -trimpath, %s", strings.Join(names, " "), BinDir, cgoWord(l.Binaries))
		layers = append(layers, struct {
			f   files
			how string
		}{f, how})
	}
	for _, l := range layers {
		layer, err := l.f.layer(o.Created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: created, CreatedBy: l.how, Comment: "tessera images " + o.Version}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = p.OS, p.Arch, created
	cf.Config = v1.Config{
		Entrypoint: im.Entrypoint,
		User:       im.User,
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels:     o.annotations(im),
	}
	return mutate.ConfigFile(img, cf)
}

func cgoWord(bins []Binary) string {
	for _, b := range bins {
		if b.Cgo {
			return "CGO_ENABLED=1"
		}
	}
	return "CGO_ENABLED=0"
}

// baseFiles is the base layer of an image for p, and its history line.
// For Glibc, every binary's needed libraries must be among glibcLibs.
func baseFiles(b Base, p Platform, bins []Binary, path func(Binary) string) (files, string, error) {
	f := files{}
	f.file("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	f.file("/etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n"))
	f.dir("/tmp", 0o1777)
	f.dir("/root", 0o700)
	f.dir("/home/nonroot", 0o700)
	if b == Static {
		for _, bin := range bins {
			if err := checkStatic(path(bin)); err != nil {
				return nil, "", fmt.Errorf("%s on the static base: %w", bin.Name, err)
			}
		}
		return f, "static base: /etc/passwd, /etc/group (root, nonroot 65532), /tmp", nil
	}
	g := glibcArches[p.Arch]
	dir, pkg := sysroot(p.Arch)
	for _, bin := range bins {
		if err := checkNeeds(path(bin), g.interp); err != nil {
			return nil, "", fmt.Errorf("%s on the glibc base: %w", bin.Name, err)
		}
	}
	libDir := "/lib/" + g.triplet
	loader := filepath.Base(g.interp)
	for _, lib := range append([]string{loader}, glibcLibs...) {
		data, err := os.ReadFile(filepath.Join(dir, lib)) // follows the soname's link
		if err != nil {
			return nil, "", fmt.Errorf("glibc runtime for %s (Debian package %s): %w", p, pkg, err)
		}
		f.file(libDir+"/"+lib, 0o755, data)
	}
	if g.interp != libDir+"/"+loader {
		f.symlink(g.interp, libDir+"/"+loader)
	}
	f.file("/etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	return f, fmt.Sprintf("glibc base: %s from Debian %s %s (%s), and the static base's files", strings.Join(glibcLibs, " "), pkg, debVersion(pkg), dir), nil
}

// debVersion is the installed version of a Debian package, or "unknown".
func debVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil || len(out) == 0 {
		return "unknown"
	}
	return string(out)
}

// checkStatic refuses a dynamically linked binary.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked (PT_INTERP); build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// checkNeeds refuses a binary whose loader is not interp or that needs a
// library the Glibc base lacks.
func checkNeeds(path, interp string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return err
			}
			if got := strings.TrimRight(string(b), "\x00"); got != interp {
				return fmt.Errorf("loader %s, want %s", got, interp)
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	for _, l := range libs {
		if !slices.Contains(glibcLibs, l) && l != filepath.Base(interp) {
			return fmt.Errorf("needs %s, which the glibc base does not carry", l)
		}
	}
	return nil
}
