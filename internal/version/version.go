// Package version is the one source of every Tessera binary's version: the
// release tag, commit and build date the Makefile stamps with -ldflags -X
// (see Get), or, for a plain `go build`/`go install`, what the Go toolchain
// recorded of the module and its checkout.
//
//	go build -ldflags "-X github.com/tessera-gpu/tessera/internal/version.version=v0.1.0 \
//	    -X github.com/tessera-gpu/tessera/internal/version.commit=$(git rev-parse HEAD) \
//	    -X github.com/tessera-gpu/tessera/internal/version.buildDate=2026-12-01T00:00:00Z"
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at build time with -ldflags -X (the Makefile's VERSION_LDFLAGS).
var (
	version   string // the release tag, or `git describe` between tags
	commit    string // the full commit hash
	buildDate string // RFC 3339, UTC
)

// Unknown is what a field is when neither the build nor the toolchain says.
const Unknown = "unknown"

// DevVersion is the version of a build that was stamped with none and whose
// module version the toolchain does not know (a `go build` in a checkout).
const DevVersion = "v0.0.0-dev"

// Info is what a binary says of itself for --version.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get is this binary's Info: the stamped values, each missing one from the
// build info (the module version `go install ...@vX.Y.Z` records, and the
// vcs.revision and vcs.time of a build with VCS stamping on).
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(version, commit, buildDate, bi)
}

func get(v, c, d string, bi *debug.BuildInfo) Info {
	info := Info{Version: v, Commit: c, BuildDate: d, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				if info.BuildDate == "" {
					info.BuildDate = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && c == "" && info.Commit != "" {
			info.Commit += "-dirty"
		}
	}
	if info.Version == "" {
		info.Version = DevVersion
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	if info.BuildDate == "" {
		info.BuildDate = Unknown
	}
	return info
}

// String is the one line --version prints after the program's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s %s)", i.Version, i.Commit, i.BuildDate, i.GoVersion, i.Platform)
}

// Print writes the line --version prints: the program's name and Info.
// raw prints the Go value, as component-base's --version=raw does.
func Print(w io.Writer, program string, raw bool) {
	if raw {
		fmt.Fprintf(w, "%#v\n", Get())
		return
	}
	fmt.Fprintf(w, "%s %s\n", program, Get())
}
