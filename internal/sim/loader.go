package sim

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// LoadMachine decodes and validates a machine file. name names the file in
// errors ("machine dgx-h100.yaml: line 42: gpus[3].pciBusID: ...") and is
// the machine's name when the file has no name: field. nodeName seeds the
// GPU UUIDs the file does not give, so that two simulated nodes loading one
// file get different UUIDs. Every problem found is reported, each on its
// own line.
func LoadMachine(name string, data []byte, nodeName string) (*Machine, error) {
	if nodeName == "" {
		return nil, fmt.Errorf("machine %s: a node name is required (GPU UUIDs are derived from it)", name)
	}
	var f fileMachine
	lines, err := decodeStrict(data, &f)
	if err != nil {
		// Every problem on a line of its own, each naming the file.
		var errs []error
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				errs = append(errs, fmt.Errorf("machine %s: %w", name, e))
			}
			return nil, errors.Join(errs...)
		}
		return nil, fmt.Errorf("machine %s: %w", name, err)
	}
	fallback := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(name), ".yaml"), ".yml")
	m, ferrs := build(&f, lines, fallback, nodeName)
	if len(ferrs) > 0 {
		errs := make([]error, len(ferrs))
		for i, fe := range ferrs {
			errs[i] = fmt.Errorf("machine %s: %w", name, fe)
		}
		return nil, errors.Join(errs...)
	}
	return m, nil
}
