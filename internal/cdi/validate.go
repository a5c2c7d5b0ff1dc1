package cdi

import (
	"errors"
	"fmt"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// validateSpec checks spec in memory as the CDI library checks a spec file
// when a container runtime loads it (cdi.ReadSpec: version, vendor and
// class, container edits, device names, no empty or duplicate devices),
// with the library's own validators; that data, spec's encoding, holds no
// character the library's YAML decoder refuses; and that every ID of our
// kind in ids names one of its devices.
//
// Parsing the written file back with the library checked the same and
// cost half of a prepare (its YAML decoder); the file is the JSON encoding
// of spec, and TestValidateMatchesReadSpec holds that the library reads
// back exactly spec, and refuses a file exactly when this refuses spec
// (FuzzValidateSpec searches for a difference).
// The library's annotation check is left out as it does nothing for typed
// specs (v1.1.2 type-asserts map[string]any); TestSpecFileShape checks our
// keys against the rule it means.
func validateSpec(spec *cdispec.Spec, data []byte, ids [][]string) error {
	if err := yamlPrintable(data); err != nil {
		return err
	}
	if err := cdispec.ValidateVersion(spec); err != nil {
		return err
	}
	vendor, class := parser.ParseQualifier(spec.Kind)
	if err := parser.ValidateVendorName(vendor); err != nil {
		return err
	}
	if err := parser.ValidateClassName(class); err != nil {
		return err
	}
	if err := (&cdiapi.ContainerEdits{ContainerEdits: &spec.ContainerEdits}).Validate(); err != nil {
		return err
	}
	if len(spec.Devices) == 0 {
		return errors.New("invalid spec, no devices")
	}
	names := make(map[string]bool, len(spec.Devices))
	for i := range spec.Devices {
		d := &spec.Devices[i]
		if err := parser.ValidateDeviceName(d.Name); err != nil {
			return err
		}
		if emptyEdits(&d.ContainerEdits) {
			return fmt.Errorf("invalid device %q: empty device edits", d.Name)
		}
		if err := (&cdiapi.ContainerEdits{ContainerEdits: &d.ContainerEdits}).Validate(); err != nil {
			return fmt.Errorf("invalid device %q: %w", d.Name, err)
		}
		if names[d.Name] {
			return fmt.Errorf("invalid spec, multiple device %q", d.Name)
		}
		names[d.Name] = true
	}
	for _, list := range ids {
		for _, id := range list {
			v, c, name, err := parser.ParseQualifiedName(id)
			if err != nil {
				return fmt.Errorf("device ID %q: %w", id, err)
			}
			if v+"/"+c != Kind {
				continue // a vendor ID resolves in the vendor's own spec
			}
			if v != vendor || c != class || !names[name] {
				return fmt.Errorf("device ID %q does not resolve in the spec", id)
			}
		}
	}
	return nil
}

// emptyEdits is the CDI library's rule for a device that edits nothing.
func emptyEdits(e *cdispec.ContainerEdits) bool {
	return len(e.Env) == 0 && len(e.DeviceNodes) == 0 && len(e.Hooks) == 0 && len(e.Mounts) == 0 &&
		len(e.AdditionalGIDs) == 0 && e.IntelRdt == nil && len(e.NetDevices) == 0
}

// yamlPrintable refuses what YAML 1.2 does not allow in a document (its
// c-printable set): JSON escapes the C0 controls but writes DEL, the C1
// controls and U+FFFE/U+FFFF as they are (and its output is valid UTF-8).
func yamlPrintable(data []byte) error {
	for i, r := range string(data) {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0, r == 0xfffe, r == 0xffff:
			return fmt.Errorf("character %U at byte %d of the spec is not allowed in a CDI spec file", r, i)
		}
	}
	return nil
}
