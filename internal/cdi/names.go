package cdi

import (
	"fmt"
	"strconv"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/parser"
)

const (
	// Vendor and Class make up the CDI kind of Tessera's per-claim specs.
	Vendor = "k8s.gpu.tessera.dev"
	Class  = "claim"
	// Kind is the CDI kind, fixed in docs/design.md.
	Kind = Vendor + "/" + Class

	// DefaultSpecDir is where container runtimes look for generated specs.
	DefaultSpecDir = "/var/run/cdi"

	// specFilePrefix + claimUID + specFileExt is a claim's spec file name,
	// following CDI's transient spec naming (vendor-class_uniq).
	specFilePrefix = Vendor + "-" + Class + "_"
	specFileExt    = ".json"
)

// validateClaimUID rejects UIDs that cannot safely be part of a CDI device
// name and a file name. Kubernetes UIDs (RFC 4122 text) always pass; the
// check mainly stops a path separator from reaching the file system.
func validateClaimUID(uid string) error {
	if err := parser.ValidateDeviceName(uid); err != nil {
		return fmt.Errorf("claim UID %q cannot name a CDI device: %w", uid, err)
	}
	return nil
}

// deviceName is the CDI device name of the index'th device of a claim. The
// index keeps names unique when one DRA device appears twice in a claim
// (two requests sharing a device); the DRA device name is there for people
// reading runtime logs.
func deviceName(claimUID string, index int, draDevice string) string {
	name := claimUID + "-" + strconv.Itoa(index)
	if s := sanitize(draDevice); s != "" {
		name += "-" + s
	}
	return name
}

// commonDeviceName is the CDI device name of a vendor's shared edits in a
// claim. It cannot collide with deviceName, whose suffix starts with a digit.
func commonDeviceName(claimUID, vendor string) string {
	return claimUID + "-common-" + sanitize(vendor)
}

// qualified returns the fully qualified CDI device ID of name.
func qualified(name string) string {
	return parser.QualifiedName(Vendor, Class, name)
}

// sanitize maps s onto CDI device-name characters. DRA device names are DNS
// labels and pass unchanged; anything else gets '_' for each bad character
// and loses trailing non-alphanumerics, since a CDI name must end in one.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !parser.IsAlphaNumeric(rune(c)) && c != '-' && c != '_' && c != '.' {
			b[i] = '_'
		}
	}
	return strings.TrimRightFunc(string(b), func(r rune) bool { return !parser.IsAlphaNumeric(r) })
}
