package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/names"
)

// validateConfigs decodes every gpu.tessera.dev config of cfgs and returns
// all their errors, each with its full field path. old are the configs of
// the stored object on an UPDATE: a config that is invalid but unchanged
// from it only warns, so an object stored before the webhook was installed
// (or before a stricter release) can still have its finalizers and labels
// changed; claim and template specs are immutable, so it could never be
// fixed otherwise.
func validateConfigs(cfgs, old []opaqueConfig) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	for _, c := range cfgs {
		if c.driver != names.DriverName {
			continue
		}
		p := c.path.Child("parameters")
		if _, err := v1alpha1.Decode(c.params); err != nil {
			cerrs := rebase(p, err)
			if !storedBefore(c, old) {
				errs = append(errs, cerrs...)
				continue
			}
			msgs := make([]string, len(cerrs))
			for i, e := range cerrs {
				msgs[i] = e.Error()
			}
			warnings = append(warnings, "tessera: "+p.String()+" is invalid but unchanged from the stored object, so it is allowed: "+strings.Join(msgs, "; "))
		}
	}
	return errs, warnings
}

// rebase turns a v1alpha1.Decode error into field errors under p, the path
// of the parameters object: a field error of Decode's (its path relative to
// the parameters) gets p in front; any other error (JSON syntax, unknown or
// duplicate fields, which name their relative path in the text) becomes one
// error at p.
func rebase(p *field.Path, err error) field.ErrorList {
	var agg utilerrors.Aggregate
	list := []error{err}
	if errors.As(err, &agg) {
		list = agg.Errors()
	}
	out := make(field.ErrorList, 0, len(list))
	for _, e := range list {
		var fe *field.Error
		if !errors.As(e, &fe) {
			out = append(out, field.Invalid(p, field.OmitValueType{}, strings.TrimPrefix(e.Error(), "parameters: ")))
			continue
		}
		c := *fe
		// Decode's "parameters" is the parameters object itself (empty).
		if c.Field == "parameters" {
			c.Field = p.String()
		} else {
			c.Field = p.String() + "." + c.Field
		}
		out = append(out, &c)
	}
	return out
}

// storedBefore reports whether old holds a config of the same driver with
// the same parameters (as JSON values: the API server may re-encode them).
func storedBefore(c opaqueConfig, old []opaqueConfig) bool {
	for _, o := range old {
		if o.driver == c.driver && sameJSON(o.params, c.params) {
			return true
		}
	}
	return false
}

func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return reflect.DeepEqual(va, vb)
}
