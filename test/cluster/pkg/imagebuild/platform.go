package imagebuild

import (
	"fmt"
	"runtime"
	"strings"
)

// Platform is an image's OS and architecture.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are the ones a release publishes.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		p := Platform{os, arch}
		if !ok || os != "linux" || (arch != "amd64" && arch != "arm64") {
			return nil, fmt.Errorf("platform %q: want linux/amd64 or linux/arm64", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// glibcArch is what the Glibc base needs to know of an architecture: its
// Debian multiarch triplet, its dynamic loader (PT_INTERP of its
// binaries) and the Debian name.
type glibcArch struct {
	triplet, interp, deb string
	// crossCC is Debian's cross compiler for cgo from another machine.
	crossCC string
}

var glibcArches = map[string]glibcArch{
	"amd64": {triplet: "x86_64-linux-gnu", interp: "/lib64/ld-linux-x86-64.so.2", deb: "amd64", crossCC: "x86_64-linux-gnu-gcc"},
	"arm64": {triplet: "aarch64-linux-gnu", interp: "/lib/ld-linux-aarch64.so.1", deb: "arm64", crossCC: "aarch64-linux-gnu-gcc"},
}

// native says whether arch is this machine's (no cross compiler needed).
func native(arch string) bool { return arch == runtime.GOARCH }

// sysroot is where this machine keeps arch's glibc runtime, and the Debian
// package that put it there: the host's own libc6 for its architecture,
// libc6-<arch>-cross (the package Debian's cross compiler links against)
// for another.
func sysroot(arch string) (dir, pkg string) {
	g := glibcArches[arch]
	if native(arch) {
		return "/lib/" + g.triplet, "libc6"
	}
	return "/usr/" + g.triplet + "/lib", "libc6-" + g.deb + "-cross"
}

// glibcLibs are the shared objects of Debian's libc6 the Glibc base
// carries: what the cgo binaries need (DT_NEEDED: libc.so.6 and the
// loader), and what the node's libnvidia-ml, mounted into the container by
// the NVIDIA container toolkit, needs besides (libm, libdl, libpthread,
// librt), and cgo's resolver (the NSS modules, libresolv).
var glibcLibs = []string{"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2", "libnss_files.so.2", "libnss_dns.so.2"}
