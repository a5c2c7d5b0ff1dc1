package checkpoint

import (
	"encoding/json"
	"fmt"
)

// upgrades[v] turns the payload of version v into version v+1. Each works on
// the generic JSON, not on the file records (record.go), which only ever
// describe the current version.
var upgrades = map[int]func(doc map[string]any) error{
	1: upgradeV1,
}

// upgrade brings a verified payload to CurrentVersion; a version it does not
// know (newer, or without an upgrade) is an error.
func upgrade(payload []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(payload, &doc); err != nil {
		return nil, fmt.Errorf("parse payload: %w", err)
	}
	v, ok := doc["version"].(float64)
	if !ok || v != float64(int(v)) {
		return nil, fmt.Errorf("payload has no version")
	}
	version := int(v)
	if version == CurrentVersion {
		return payload, nil
	}
	for ; version < CurrentVersion; version++ {
		up, ok := upgrades[version]
		if !ok {
			break
		}
		if err := up(doc); err != nil {
			return nil, fmt.Errorf("upgrade version %d: %w", version, err)
		}
		doc["version"] = version + 1
	}
	if version != CurrentVersion {
		return nil, fmt.Errorf("unknown version %d (this agent reads %d and upgrades older ones)", int(v), CurrentVersion)
	}
	return json.Marshal(doc)
}

// upgradeV1: placements were written with Go's field names, Start and Size.
func upgradeV1(doc map[string]any) error {
	claims, _ := doc["claims"].(map[string]any)
	for uid, c := range claims {
		claim, ok := c.(map[string]any)
		if !ok {
			return fmt.Errorf("claim %s is not an object", uid)
		}
		devices, _ := claim["devices"].([]any)
		for _, d := range devices {
			dev, ok := d.(map[string]any)
			if !ok {
				return fmt.Errorf("claim %s: a device is not an object", uid)
			}
			pl, ok := dev["placement"].(map[string]any)
			if !ok {
				continue
			}
			for old, name := range map[string]string{"Start": "start", "Size": "size"} {
				if v, ok := pl[old]; ok {
					pl[name] = v
					delete(pl, old)
				}
			}
		}
	}
	return nil
}
