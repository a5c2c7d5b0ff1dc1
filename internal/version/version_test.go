package version

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestGet(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	tests := []struct {
		name          string
		v, c, d       string
		bi            *debug.BuildInfo
		want          Info
		wantUnchanged bool
	}{
		{name: "stamped wins", v: "v0.1.0", c: "deadbeef", d: "2026-12-01T00:00:00Z", bi: vcs,
			want: Info{Version: "v0.1.0", Commit: "deadbeef", BuildDate: "2026-12-01T00:00:00Z"}},
		{name: "vcs stamping fills the rest", bi: vcs,
			want: Info{Version: DevVersion, Commit: "abc123-dirty", BuildDate: "2026-01-02T03:04:05Z"}},
		{name: "go install @version", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}},
			want: Info{Version: "v0.2.0", Commit: Unknown, BuildDate: Unknown}},
		{name: "nothing known",
			want: Info{Version: DevVersion, Commit: Unknown, BuildDate: Unknown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.v, tc.c, tc.d, tc.bi)
			if got.Version != tc.want.Version || got.Commit != tc.want.Commit || got.BuildDate != tc.want.BuildDate {
				t.Errorf("get = %+v, want %+v", got, tc.want)
			}
			if got.GoVersion == "" || !strings.Contains(got.Platform, "/") {
				t.Errorf("get = %+v: no Go version or platform", got)
			}
		})
	}
}

func TestFlag(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		requested, raw bool
		err            bool
	}{
		{args: nil},
		{args: []string{"--version"}, requested: true},
		{args: []string{"--version=true"}, requested: true},
		{args: []string{"--version=false"}},
		{args: []string{"--version=raw"}, requested: true, raw: true},
		{args: []string{"--version=v1.2.3"}, err: true},
	} {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		f := AddFlag(fs)
		err := fs.Parse(tc.args)
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v", tc.args, err)
			continue
		}
		if f.Requested() != tc.requested || f.Raw() != tc.raw {
			t.Errorf("%q: requested %v raw %v", tc.args, f.Requested(), f.Raw())
		}
	}
}

func TestPrint(t *testing.T) {
	var b bytes.Buffer
	Print(&b, "tessera-x", false)
	if !strings.HasPrefix(b.String(), "tessera-x v") || !strings.Contains(b.String(), "commit ") {
		t.Errorf("Print = %q", b.String())
	}
	b.Reset()
	Print(&b, "tessera-x", true)
	if !strings.HasPrefix(b.String(), "version.Info{Version:") {
		t.Errorf("Print raw = %q", b.String())
	}
}
