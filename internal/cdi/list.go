package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// ErrBadSpec marks, in ListClaimSpecs' error, a claim spec file that could
// not be read back. The caller can tell this from a failure to list the
// directory at all and go on with the claims that were read.
var ErrBadSpec = errors.New("unreadable claim CDI spec")

// RecordedClaim is a claim as its spec file records it.
type RecordedClaim struct {
	Claim ClaimRef
	// Devices are the claim's allocated devices, in the order
	// WriteClaimSpec got them, as its checkpoint entry holds them: the
	// spec records each as the checkpoint does (record.go). What the spec
	// does not know (a carve) is left empty.
	Devices []checkpoint.Device
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
		rec, ok, err := recordOf(d.Annotations)
		if err != nil {
			return RecordedClaim{}, fmt.Errorf("CDI spec %s device %s: %w", path, rec.Device, err)
		}
		if ok {
			rc.Devices = append(rc.Devices, checkpoint.DeviceOf(rec))
		}
	}
	if len(rc.Devices) == 0 {
		return RecordedClaim{}, fmt.Errorf("CDI spec %s records no devices", path)
	}
	return rc, nil
}
