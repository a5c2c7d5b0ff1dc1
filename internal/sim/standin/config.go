package standin

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// ConfigSchemaVersion is the only schema_version a v3 configuration file
// may name.
const ConfigSchemaVersion = "1.0"

// DefaultNamespace exists in every server and is never created or deleted.
const DefaultNamespace = "default"

// Config is a v3 configuration file (-a), checked.
type Config struct {
	Servers map[string]ServerConfig
}

// ServerConfig is one [servers.<name>] table.
type ServerConfig struct {
	// AllowedDevices as the file lists them; empty means all of the
	// daemon's devices.
	AllowedDevices []string
	Limits
	Namespaces map[string]Limits
}

// Limits are the settings of a server or a namespace; zero values are
// unset.
type Limits struct {
	// PinnedMemoryLimit as given ("4096M", "4G"), or "".
	PinnedMemoryLimit string `json:"pinnedMemoryLimit,omitempty"`
	// ActiveThreadPercentage is 1-100, or 0.
	ActiveThreadPercentage int `json:"activeThreadPercentage,omitempty"`
}

// same says whether l and o limit the same, "4G" being "4096M".
func (l Limits) same(o Limits) bool {
	a, _ := memMiB(l.PinnedMemoryLimit)
	b, _ := memMiB(o.PinnedMemoryLimit)
	return a == b && l.ActiveThreadPercentage == o.ActiveThreadPercentage
}

// String is the answer to namespace get: unset reads as no limit.
func (l Limits) String() string {
	mem, pct := l.PinnedMemoryLimit, l.ActiveThreadPercentage
	if mem == "" {
		mem = "0M"
	}
	if pct == 0 {
		pct = 100
	}
	return fmt.Sprintf("pinned_memory_limit=%s active_thread_percentage=%d", mem, pct)
}

// fileConfig is the file's layout; any key outside it is an error.
type fileConfig struct {
	SchemaVersion string                `toml:"schema_version"`
	Servers       map[string]fileServer `toml:"servers"`
}

type fileServer struct {
	AllowedDevices         string                   `toml:"allowed_devices"`
	PinnedMemoryLimit      string                   `toml:"pinned_memory_limit"`
	ActiveThreadPercentage string                   `toml:"active_thread_percentage"`
	Namespaces             map[string]fileNamespace `toml:"namespaces"`
}

type fileNamespace struct {
	PinnedMemoryLimit      string `toml:"pinned_memory_limit"`
	ActiveThreadPercentage string `toml:"active_thread_percentage"`
}

// LoadConfig reads and checks the configuration file at path against the
// daemon's devices (CUDA_VISIBLE_DEVICES, split; nil when unset).
func LoadConfig(path string, devices []string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("configuration error: %w", err)
	}
	cfg, err := ParseConfig(string(data), devices)
	if err != nil {
		return nil, fmt.Errorf("configuration error in %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig checks a configuration file's text against the daemon's
// devices (nil when CUDA_VISIBLE_DEVICES is unset: any device goes).
func ParseConfig(text string, devices []string) (*Config, error) {
	var f fileConfig
	md, err := toml.Decode(text, &f)
	if err != nil {
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("unknown key %s", strings.Join(keys, ", "))
	}
	if !md.IsDefined("schema_version") {
		return nil, fmt.Errorf("schema_version is missing (want %q)", ConfigSchemaVersion)
	}
	if f.SchemaVersion != ConfigSchemaVersion {
		return nil, fmt.Errorf("schema_version %q is not %q", f.SchemaVersion, ConfigSchemaVersion)
	}
	cfg := &Config{Servers: map[string]ServerConfig{}}
	for _, name := range slices.Sorted(maps.Keys(f.Servers)) {
		fs := f.Servers[name]
		key := "servers." + name
		if err := checkServerName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		s := ServerConfig{Namespaces: map[string]Limits{}}
		if fs.AllowedDevices != "" || md.IsDefined("servers", name, "allowed_devices") {
			for _, dev := range strings.Split(fs.AllowedDevices, ",") {
				dev = strings.TrimSpace(dev)
				if err := checkDevice(devices, dev); err != nil {
					return nil, fmt.Errorf("%s.allowed_devices: %w", key, err)
				}
				if slices.Contains(s.AllowedDevices, dev) {
					return nil, fmt.Errorf("%s.allowed_devices: device %q listed twice", key, dev)
				}
				s.AllowedDevices = append(s.AllowedDevices, dev)
			}
		}
		if s.Limits, err = parseLimits(fs.PinnedMemoryLimit, fs.ActiveThreadPercentage); err != nil {
			return nil, fmt.Errorf("%s.%w", key, err)
		}
		for _, ns := range slices.Sorted(maps.Keys(fs.Namespaces)) {
			nkey := key + ".namespaces." + ns
			if err := checkNamespaceName(ns); err != nil {
				return nil, fmt.Errorf("%s: %w", nkey, err)
			}
			fn := fs.Namespaces[ns]
			l, err := parseLimits(fn.PinnedMemoryLimit, fn.ActiveThreadPercentage)
			if err != nil {
				return nil, fmt.Errorf("%s.%w", nkey, err)
			}
			s.Namespaces[ns] = l
		}
		cfg.Servers[name] = s
	}
	return cfg, nil
}

// parseLimits checks a table's settings; its errors start with the key's
// last part, for the caller to prefix with the table.
func parseLimits(mem, pct string) (Limits, error) {
	var l Limits
	if mem != "" {
		if _, err := memMiB(mem); err != nil {
			return l, fmt.Errorf("pinned_memory_limit: %w", err)
		}
		l.PinnedMemoryLimit = mem
	}
	if pct != "" {
		p, err := parsePercentage(pct)
		if err != nil {
			return l, fmt.Errorf("active_thread_percentage: %w", err)
		}
		l.ActiveThreadPercentage = p
	}
	return l, nil
}

// memMiB is a "<n>M" or "<n>G" limit in MiB; "" is 0.
func memMiB(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	if !memLimit.MatchString(v) {
		return 0, fmt.Errorf("%q is not an integer followed by M or G", v)
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 40)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", v)
	}
	if v[len(v)-1] == 'G' {
		n *= 1024
	}
	return n, nil
}

func parsePercentage(v string) (int, error) {
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 100 {
		return 0, fmt.Errorf("%q is not an integer from 1 to 100", v)
	}
	return p, nil
}

var objectName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// checkName: letters, digits, '-', '_', '.', 1-63 characters. The first
// must be a letter or digit, so that no name is "." or "..", or a client's
// hidden reply FIFO.
func checkName(what, name string) error {
	if !objectName.MatchString(name) {
		return fmt.Errorf("%s name %q is not 1-63 letters, digits, '-', '_' or '.' starting with a letter or digit", what, name)
	}
	if name == ControlFIFO {
		return fmt.Errorf("%s name %q is the control socket's", what, name)
	}
	return nil
}

// checkServerName also keeps a server's directory off the daemon's own
// files in the pipe directory.
func checkServerName(name string) error {
	if err := checkName("server", name); err != nil {
		return err
	}
	if name == StatusFile || name == PIDFile {
		return fmt.Errorf("server name %q is the daemon's file", name)
	}
	return nil
}

// checkNamespaceName is for a namespace to create: the default namespace
// exists already.
func checkNamespaceName(name string) error {
	if err := checkName("namespace", name); err != nil {
		return err
	}
	if name == DefaultNamespace {
		return fmt.Errorf("namespace %q always exists and is not created", name)
	}
	return nil
}

// checkDevice checks that dev is one of devices, by UUID or index; with
// no devices (CUDA_VISIBLE_DEVICES unset) any non-empty name goes.
func checkDevice(devices []string, dev string) error {
	if dev == "" {
		return errors.New("empty device name")
	}
	if devices == nil || slices.Contains(devices, dev) {
		return nil
	}
	if i, err := strconv.Atoi(dev); err == nil && i >= 0 && i < len(devices) {
		return nil
	}
	return fmt.Errorf("device %q is not visible to the daemon (CUDA_VISIBLE_DEVICES=%s)", dev, strings.Join(devices, ","))
}
