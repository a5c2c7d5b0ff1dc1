package flagenv

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    map[string]string
		wantErr []string
	}{
		{
			name: "env sets a flag",
			env:  map[string]string{"TESSERA_BIND_ADDRESS": ":8443"},
			want: map[string]string{"bind-address": ":8443", "port-file": "", "replicas": "1"},
		},
		{
			name: "the command line wins",
			args: []string{"--bind-address=:7443"},
			env:  map[string]string{"TESSERA_BIND_ADDRESS": ":8443", "TESSERA_PORT_FILE": "/run/port"},
			want: map[string]string{"bind-address": ":7443", "port-file": "/run/port", "replicas": "1"},
		},
		{
			name: "set but empty clears a default",
			env:  map[string]string{"TESSERA_BIND_ADDRESS": ""},
			want: map[string]string{"bind-address": "", "port-file": "", "replicas": "1"},
		},
		{
			name: "other prefixes are ignored",
			env:  map[string]string{"BIND_ADDRESS": ":1", "OTHER_BIND_ADDRESS": ":2"},
			want: map[string]string{"bind-address": ":9443", "port-file": "", "replicas": "1"},
		},
		{
			name:    "every bad value is reported",
			env:     map[string]string{"TESSERA_REPLICAS": "two", "TESSERA_VERBOSE": "maybe"},
			wantErr: []string{`TESSERA_REPLICAS="two"`, `TESSERA_VERBOSE="maybe"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.String("bind-address", ":9443", "")
			fs.String("port-file", "", "")
			fs.Int("replicas", 1, "")
			fs.Bool("verbose", false, "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := Apply(fs, "TESSERA_", func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s=%q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestName(t *testing.T) {
	if got := Name("TESSERA_", "tls-private-key-file"); got != "TESSERA_TLS_PRIVATE_KEY_FILE" {
		t.Errorf("Name = %s", got)
	}
}

// TestVersion: --version prints the program's version line and asks for an
// exit without running; TESSERA_VERSION in the environment changes nothing.
func TestVersion(t *testing.T) {
	add := func(fs *pflag.FlagSet) { fs.String("node-name", "", "") }
	var out strings.Builder
	_, stop, err := parse("tessera-x", []string{"--version"}, add, func(string) (string, bool) { return "", false }, &out)
	if err != nil || !stop {
		t.Fatalf("--version: stop %v, err %v", stop, err)
	}
	if !strings.HasPrefix(out.String(), "tessera-x v") || !strings.Contains(out.String(), "commit ") {
		t.Errorf("--version printed %q", out.String())
	}
	out.Reset()
	env := map[string]string{"TESSERA_VERSION": "true", "TESSERA_NODE_NAME": "n1"}
	flush, stop, err := parse("tessera-x", nil, add, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &out)
	if err != nil || stop || out.Len() > 0 {
		t.Fatalf("TESSERA_VERSION=true: stop %v, err %v, printed %q", stop, err, out.String())
	}
	flush()
}
