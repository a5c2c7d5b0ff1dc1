package standin

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	const good = `
schema_version = "1.0"
[servers.gpu0]
allowed_devices = "GPU-a,1"
pinned_memory_limit = "4096M"
active_thread_percentage = "50"
[servers.gpu0.namespaces.share-1]
pinned_memory_limit = "1G"
active_thread_percentage = "25"
[servers.gpu0.namespaces."claim.x_2"]
[servers.other]
`
	tests := []struct {
		name    string
		text    string
		devices []string
		want    *Config
		wantErr string
	}{
		{
			name: "good", text: good, devices: []string{"GPU-a", "GPU-b"},
			want: &Config{Servers: map[string]ServerConfig{
				"gpu0": {
					AllowedDevices: []string{"GPU-a", "1"},
					Limits:         Limits{PinnedMemoryLimit: "4096M", ActiveThreadPercentage: 50},
					Namespaces: map[string]Limits{
						"share-1":   {PinnedMemoryLimit: "1G", ActiveThreadPercentage: 25},
						"claim.x_2": {},
					},
				},
				"other": {Namespaces: map[string]Limits{}},
			}},
		},
		{
			name: "any device without CUDA_VISIBLE_DEVICES", text: "schema_version = \"1.0\"\n[servers.s]\nallowed_devices = \"GPU-z\"\n",
			want: &Config{Servers: map[string]ServerConfig{"s": {AllowedDevices: []string{"GPU-z"}, Namespaces: map[string]Limits{}}}},
		},
		{name: "no servers", text: `schema_version = "1.0"`, want: &Config{Servers: map[string]ServerConfig{}}},
		{name: "unknown top-level key", text: "extra = 1\n" + good, devices: []string{"GPU-a", "GPU-b"}, wantErr: "unknown key extra"},
		{name: "unknown server key", text: "schema_version = \"1.0\"\n[servers.s]\nmax_clients = \"4\"\n", wantErr: "unknown key servers.s.max_clients"},
		{name: "unknown namespace key", text: "schema_version = \"1.0\"\n[servers.s.namespaces.n]\nuid = \"0\"\n", wantErr: "unknown key servers.s.namespaces.n.uid"},
		{name: "missing schema version", text: "[servers.s]\n", wantErr: "schema_version is missing"},
		{name: "wrong schema version", text: "schema_version = \"2.0\"\n", wantErr: `schema_version "2.0"`},
		{name: "limit without unit", text: "schema_version = \"1.0\"\n[servers.s]\npinned_memory_limit = \"4096\"\n", wantErr: "servers.s.pinned_memory_limit: \"4096\" is not an integer followed by M or G"},
		{name: "fractional namespace limit", text: "schema_version = \"1.0\"\n[servers.s.namespaces.n]\npinned_memory_limit = \"1.5G\"\n", wantErr: "servers.s.namespaces.n.pinned_memory_limit"},
		{name: "percentage 0", text: "schema_version = \"1.0\"\n[servers.s]\nactive_thread_percentage = \"0\"\n", wantErr: "servers.s.active_thread_percentage: \"0\" is not an integer from 1 to 100"},
		{name: "percentage 101", text: "schema_version = \"1.0\"\n[servers.s.namespaces.n]\nactive_thread_percentage = \"101\"\n", wantErr: "servers.s.namespaces.n.active_thread_percentage"},
		{name: "percentage as a number", text: "schema_version = \"1.0\"\n[servers.s]\nactive_thread_percentage = 50\n", wantErr: "active_thread_percentage"},
		{name: "device not visible", text: "schema_version = \"1.0\"\n[servers.s]\nallowed_devices = \"GPU-a,GPU-c\"\n", devices: []string{"GPU-a", "GPU-b"}, wantErr: `servers.s.allowed_devices: device "GPU-c" is not visible`},
		{name: "index not visible", text: "schema_version = \"1.0\"\n[servers.s]\nallowed_devices = \"2\"\n", devices: []string{"GPU-a", "GPU-b"}, wantErr: "not visible"},
		{name: "empty device", text: "schema_version = \"1.0\"\n[servers.s]\nallowed_devices = \"GPU-a,\"\n", devices: []string{"GPU-a"}, wantErr: "empty device name"},
		{name: "device twice", text: "schema_version = \"1.0\"\n[servers.s]\nallowed_devices = \"GPU-a,GPU-a\"\n", devices: []string{"GPU-a"}, wantErr: "listed twice"},
		{name: "default namespace configured", text: "schema_version = \"1.0\"\n[servers.s.namespaces.default]\n", wantErr: `namespace "default" always exists`},
		{name: "namespace named control", text: "schema_version = \"1.0\"\n[servers.s.namespaces.control]\n", wantErr: "control socket"},
		{name: "server named like the status file", text: "schema_version = \"1.0\"\n[servers.\"status.json\"]\n", wantErr: "daemon's file"},
		{name: "server name with a slash", text: "schema_version = \"1.0\"\n[servers.\"a/b\"]\n", wantErr: `server name "a/b"`},
		{name: "hidden server name", text: "schema_version = \"1.0\"\n[servers.\"..\"]\n", wantErr: `server name ".."`},
		{name: "namespace name too long", text: "schema_version = \"1.0\"\n[servers.s.namespaces." + strings.Repeat("n", 64) + "]\n", wantErr: "1-63"},
		{name: "not TOML", text: "schema_version = \n", wantErr: "toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.text, tt.devices)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		a, b Limits
		same bool
		str  string
	}{
		{a: Limits{}, b: Limits{}, same: true, str: "pinned_memory_limit=0M active_thread_percentage=100"},
		{a: Limits{PinnedMemoryLimit: "4G"}, b: Limits{PinnedMemoryLimit: "4096M"}, same: true, str: "pinned_memory_limit=4G active_thread_percentage=100"},
		{a: Limits{PinnedMemoryLimit: "4G"}, b: Limits{PinnedMemoryLimit: "4095M"}, str: "pinned_memory_limit=4G active_thread_percentage=100"},
		{a: Limits{ActiveThreadPercentage: 25}, b: Limits{ActiveThreadPercentage: 26}, str: "pinned_memory_limit=0M active_thread_percentage=25"},
	}
	for _, tt := range tests {
		if got := tt.a.same(tt.b); got != tt.same {
			t.Errorf("%+v same as %+v: %v", tt.a, tt.b, got)
		}
		if got := tt.a.String(); got != tt.str {
			t.Errorf("%+v: %q, want %q", tt.a, got, tt.str)
		}
	}
}
