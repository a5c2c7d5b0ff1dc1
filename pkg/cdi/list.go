package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/tessera-gpu/tessera/pkg/sharing"
)

// ErrBadSpec marks, in ListClaimSpecs' error, a claim spec file that could
// not be read back. The caller can tell this from a failure to list the
// directory at all and go on with the claims that were read.
var ErrBadSpec = errors.New("unreadable claim CDI spec")

// RecordedClaim is a claim as its spec file records it.
type RecordedClaim struct {
	Claim   ClaimRef
	Devices []RecordedDevice
}

// RecordedDevice is one allocated device of a recorded claim, in the order
// WriteClaimSpec got them.
type RecordedDevice struct {
	Request, Pool, Device string
	CDIDeviceIDs          []string
	// GPUUUID and PartitionUUID (empty for a whole GPU) say what the device
	// was, so recovery can find partitions to destroy on unprepare.
	GPUUUID, PartitionUUID string
	// Sharing is the device's recorded sharing settings, nil for none.
	Sharing *sharing.Settings
	// ShareID is the allocation's ShareID on a multi-allocatable device.
	ShareID string
}

// ListClaimSpecs reads every Tessera claim spec in the spec directory, to
// rebuild the checkpoint after it was lost. Claims come sorted by UID.
//
// A spec that cannot be read or lacks its records does not stop the others:
// ListClaimSpecs returns what it could read together with an error joining
// one error per bad file, each naming the file and wrapping ErrBadSpec, so
// the caller can log and go on instead of failing to start over one file.
func (w *Writer) ListClaimSpecs() ([]RecordedClaim, error) {
	entries, err := os.ReadDir(w.specDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list CDI specs: %w", err)
	}
	var (
		out  []RecordedClaim
		errs []error
	)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, specFilePrefix) || !strings.HasSuffix(name, specFileExt) {
			continue
		}
		uid := strings.TrimSuffix(strings.TrimPrefix(name, specFilePrefix), specFileExt)
		rc, err := w.readClaimSpec(uid)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrBadSpec, err))
			continue
		}
		out = append(out, rc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Claim.UID < out[j].Claim.UID })
	return out, errors.Join(errs...)
}

func (w *Writer) readClaimSpec(uid string) (RecordedClaim, error) {
	path := w.SpecPath(uid)
	spec, err := cdiapi.ReadSpec(path, 0)
	if err != nil {
		return RecordedClaim{}, fmt.Errorf("read CDI spec %s: %w", path, err)
	}
	if spec.Kind != Kind {
		return RecordedClaim{}, fmt.Errorf("CDI spec %s has kind %q, want %q", path, spec.Kind, Kind)
	}
	rc := RecordedClaim{Claim: ClaimRef{
		UID:       spec.Annotations[annClaimUID],
		Namespace: spec.Annotations[annClaimNamespace],
		Name:      spec.Annotations[annClaimName],
	}}
	// The file name is only a name; the annotation is the record. They must
	// agree or the file was renamed or hand-edited.
	if rc.Claim.UID != uid {
		return RecordedClaim{}, fmt.Errorf("CDI spec %s records claim UID %q, file name says %q", path, rc.Claim.UID, uid)
	}
	for _, d := range spec.Devices {
		if _, ok := d.Annotations[annDevice]; !ok {
			continue // a common device
		}
		var ids []string
		if s := d.Annotations[annCDIDeviceIDs]; s != "" {
			ids = strings.Split(s, ",")
		}
		rd := RecordedDevice{
			Request:       d.Annotations[annRequest],
			Pool:          d.Annotations[annPool],
			Device:        d.Annotations[annDevice],
			CDIDeviceIDs:  ids,
			GPUUUID:       d.Annotations[annGPUUUID],
			PartitionUUID: d.Annotations[annPartitionUUID],
			ShareID:       d.Annotations[annShareID],
		}
		if js, ok := d.Annotations[annSharing]; ok {
			rd.Sharing = &sharing.Settings{}
			if err := json.Unmarshal([]byte(js), rd.Sharing); err != nil {
				return RecordedClaim{}, fmt.Errorf("CDI spec %s device %s: sharing annotation: %w", path, rd.Device, err)
			}
		}
		rc.Devices = append(rc.Devices, rd)
	}
	if len(rc.Devices) == 0 {
		return RecordedClaim{}, fmt.Errorf("CDI spec %s records no devices", path)
	}
	return rc, nil
}
