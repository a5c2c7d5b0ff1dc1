package amdsysfs

import (
	"bytes"
	"fmt"
	"strconv"
)

// Properties is a parsed KFD "properties" file: one "key value" pair per
// line, every value an unsigned decimal. The kernel prints them with %u and
// %llu (kfd_topology.c, sysfs_show_32bit_prop / sysfs_show_64bit_prop), so
// 64-bit values such as unique_id and hive_id fit a uint64 and nothing else
// does.
type Properties map[string]uint64

// maxPropertiesSize bounds what ParseProperties accepts: real files are
// under 2 KiB, and a garbled sysfs read must not cost unbounded memory.
const maxPropertiesSize = 64 << 10

// ParseProperties parses a KFD properties file. Blank lines are ignored; a
// line that is not "key value", a key outside [a-z0-9_], a value that is
// not an unsigned decimal, or a repeated key is an error naming the line,
// because a half-understood file would publish wrong capacities.
func ParseProperties(data []byte) (Properties, error) {
	if len(data) > maxPropertiesSize {
		return nil, fmt.Errorf("properties: %d bytes, more than the %d a KFD file can hold", len(data), maxPropertiesSize)
	}
	p := Properties{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fields := bytes.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("properties line %d: want \"key value\", got %d fields", i+1, len(fields))
		}
		key := string(fields[0])
		if !validKey(key) {
			return nil, fmt.Errorf("properties line %d: key %q is not [a-z0-9_]+", i+1, truncate(key))
		}
		v, err := strconv.ParseUint(string(fields[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("properties line %d: key %s: value %q is not an unsigned decimal", i+1, key, truncate(string(fields[1])))
		}
		if _, dup := p[key]; dup {
			return nil, fmt.Errorf("properties line %d: key %s repeated", i+1, key)
		}
		p[key] = v
	}
	return p, nil
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// truncate keeps error messages readable when a file is garbage.
func truncate(s string) string {
	const n = 32
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Get returns the value of key and whether the file had it.
func (p Properties) Get(key string) (uint64, bool) {
	v, ok := p[key]
	return v, ok
}
