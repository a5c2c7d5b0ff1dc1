package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/tessera-gpu/tessera/internal/names"
)

// LoadFiles reads ResourceSlices and ResourceClaims from YAML or JSON
// streams ("-" is standard input): what `tessera-kubelet-plugin --dry-run`
// prints, `kubectl get -o yaml` output (a v1 List) or a mix. Objects of
// other kinds are skipped; slices of other drivers too.
func LoadFiles(paths []string) (*Snapshot, error) {
	s := &Snapshot{}
	for _, p := range paths {
		var r io.Reader
		if p == "-" {
			r = os.Stdin
		} else {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			r = f
		}
		if err := s.Decode(p, r); err != nil {
			return nil, err
		}
	}
	if len(s.Slices) == 0 {
		return nil, fmt.Errorf("no ResourceSlices of driver %s in %v", names.DriverName, paths)
	}
	s.Source = fmt.Sprint(paths)
	return s, nil
}

// Decode adds the objects of one stream, named name in errors.
func (s *Snapshot) Decode(name string, r io.Reader) error {
	return DecodeStream(name, r, s.add)
}

// DecodeStream hands each document of a YAML or JSON stream to add; errors
// name the stream and the document.
func DecodeStream(name string, r io.Reader, add func(json.RawMessage) error) error {
	d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := d.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: not YAML or JSON: %w", name, doc, err)
		}
		if err := add(raw); err != nil {
			return fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
	}
}

// add adds one object, or the items of a list.
func (s *Snapshot) add(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil // an empty document, e.g. before the first "---"
	}
	if raw[0] != '{' {
		return errors.New("not a Kubernetes object (expected a mapping with apiVersion and kind)")
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	switch tm.Kind {
	case "List", "ResourceSliceList", "ResourceClaimList":
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("%s: %w", tm.Kind, err)
		}
		for i, it := range l.Items {
			if err := s.add(it); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		return nil
	case "ResourceSlice", "ResourceClaim":
	default:
		return nil
	}
	if tm.APIVersion != resourceapi.SchemeGroupVersion.String() {
		return fmt.Errorf("%s has apiVersion %q; only %s is read", tm.Kind, tm.APIVersion, resourceapi.SchemeGroupVersion)
	}
	if tm.Kind == "ResourceSlice" {
		var o resourceapi.ResourceSlice
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("ResourceSlice: %w", err)
		}
		if o.Spec.Driver == names.DriverName {
			s.Slices = append(s.Slices, o)
		}
		return nil
	}
	var o resourceapi.ResourceClaim
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("ResourceClaim: %w", err)
	}
	s.Claims = append(s.Claims, o)
	return nil
}
