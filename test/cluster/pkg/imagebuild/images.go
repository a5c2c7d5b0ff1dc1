// Package imagebuild builds Tessera's production images in Go, without a
// Docker daemon (github.com/google/go-containerregistry): each image an OCI
// image layout with an index of its platforms (linux/amd64, linux/arm64),
// deterministic layers (fixed times, owner 0, fixed modes), OCI media
// types, history, labels with the version, an entrypoint and a user.
//
// Images is what each image holds; deployments/Dockerfile describes the
// same images for Docker users (a test compares the two). Build compiles
// the binaries (Binaries) and assembles the images (Image.Build), and
// WriteLayout writes one to disk. test/cluster/cmd/images is the command
// (make images, make release).
package imagebuild

import (
	"sort"
)

// BinDir is where every image keeps its programs.
const BinDir = "/usr/bin"

// Nonroot is the user of the images whose program needs no root:
// distroless's nonroot, which the chart also runs the webhook as.
const Nonroot = "65532:65532"

// Binary is one Go program of the repository built into an image.
type Binary struct {
	Name    string // the command's name, its file name in BinDir
	Package string // the package to build, relative to the module directory
	// Cgo: built with CGO_ENABLED=1 (go-nvml loads libnvidia-ml with
	// dlopen), so it needs the Glibc base; the others are static.
	Cgo bool
}

// Path is where the binary is in an image.
func (b Binary) Path() string { return BinDir + "/" + b.Name }

// Base is what an image holds beneath its programs.
type Base int

const (
	// Static: nothing but /etc/passwd, /etc/group (root and nonroot) and
	// /tmp, for static binaries (CGO_ENABLED=0).
	Static Base = iota
	// Glibc: Static's files and Debian's glibc runtime (the dynamic loader,
	// libc, libm, libdl, libpthread, librt, libresolv, the NSS modules),
	// taken from the libc6 package the cgo binaries were linked against.
	Glibc
)

func (b Base) String() string {
	if b == Glibc {
		return "glibc"
	}
	return "static"
}

// Layer is one layer of programs over the base.
type Layer struct {
	Binaries []Binary
}

// Image is one production image.
type Image struct {
	Name        string // the repository's last element, e.g. tessera-webhook
	Description string
	Base        Base
	Layers      []Layer // over the base, in order
	Entrypoint  []string
	User        string // uid:gid
}

// Binaries are the image's programs, in layer order.
func (im Image) Binaries() []Binary {
	var out []Binary
	for _, l := range im.Layers {
		out = append(out, l.Binaries...)
	}
	return out
}

// Files are the image paths of its programs, sorted.
func (im Image) Files() []string {
	var out []string
	for _, b := range im.Binaries() {
		out = append(out, b.Path())
	}
	sort.Strings(out)
	return out
}

// The repository's programs the images hold.
var (
	Agent   = Binary{Name: "tessera-kubelet-plugin", Package: "./cmd/tessera-kubelet-plugin", Cgo: true}
	CDIHook = Binary{Name: "tessera-cdi-hook", Package: "./cmd/tessera-cdi-hook", Cgo: true}
	Sim     = Binary{Name: "tessera-sim", Package: "./cmd/tessera-sim"}
	Webhook = Binary{Name: "tessera-webhook", Package: "./cmd/tessera-webhook"}
)

// Images are the production images:
//
//   - tessera-kubelet-plugin: the agent, on the Glibc base (a cgo build for
//     go-nvml's dlopen of the node's libnvidia-ml), with tessera-cdi-hook,
//     which the chart's init container copies onto the host (`install`) for
//     the runtime to run. Root: the agent creates device nodes' CDI specs,
//     sockets and its checkpoint in root-owned host directories, writes
//     cgroup files and runs MPS daemons.
//   - tessera-kubelet-plugin-sim: the same layers, then tessera-sim (the sim
//     backend's MPS stand-in and fault injector, which the agent runs from
//     its own directory): for --backend=sim and the tests only.
//   - tessera-webhook: static, on the Static base, as nonroot.
func Images() []Image {
	agent := Layer{Binaries: []Binary{Agent, CDIHook}}
	entry := []string{Agent.Path()}
	return []Image{
		{Name: "tessera-kubelet-plugin", Description: "Tessera's node agent (DRA kubelet plugin) and the CDI hook its chart installs on the host",
			Base: Glibc, Layers: []Layer{agent}, Entrypoint: entry, User: "0:0"},
		{Name: "tessera-kubelet-plugin-sim", Description: "Tessera's node agent with the simulator's programs, for --backend=sim",
			Base: Glibc, Layers: []Layer{agent, {Binaries: []Binary{Sim}}}, Entrypoint: entry, User: "0:0"},
		{Name: "tessera-webhook", Description: "Tessera's validating admission webhook for gpu.tessera.dev configs",
			Base: Static, Layers: []Layer{{Binaries: []Binary{Webhook}}}, Entrypoint: []string{Webhook.Path()}, User: Nonroot},
	}
}

// Lookup is the image of Images named name.
func Lookup(name string) (Image, bool) {
	for _, im := range Images() {
		if im.Name == name {
			return im, true
		}
	}
	return Image{}, false
}
