package webhook

import (
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// review judges one admission request. Anything the webhook was not meant
// to see (another kind, another operation) is allowed with a warning: a
// misregistration must never lock a cluster out.
func review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	kind := schema.GroupVersionKind(req.Kind)
	if _, ok := extractors[kind]; !ok {
		resp.Warnings = []string{fmt.Sprintf("tessera: the gpu.tessera.dev webhook does not validate %s; allowed unchecked (check its registration)", kindString(kind))}
		return resp
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		resp.Warnings = []string{fmt.Sprintf("tessera: the gpu.tessera.dev webhook does not validate %s; allowed unchecked (check its registration)", req.Operation)}
		return resp
	}
	meta, cfgs, err := decodeObject(kind, req.Object.Raw)
	if err != nil {
		return deny(resp, &metav1.Status{Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
			Message: fmt.Sprintf("%s: %v", objectRef(kind, req, meta), err)})
	}
	var old []opaqueConfig
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		// Without the stored object every config is judged as new, which
		// refuses more, never less.
		if _, old, err = decodeObject(kind, req.OldObject.Raw); err != nil {
			resp.Warnings = append(resp.Warnings, fmt.Sprintf("tessera: stored object: %v", err))
		}
	}
	errs, warnings := validateConfigs(cfgs, old)
	resp.Warnings = append(resp.Warnings, warnings...)
	if len(errs) == 0 {
		return resp
	}
	// The API server's own Invalid status (code 422, a cause per field), so
	// clients see apierrors.IsInvalid, with a message naming the object as
	// kind namespace/name, which a user of several namespaces needs.
	status := apierrors.NewInvalid(kind.GroupKind(), meta.Name, errs).Status()
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	status.Message = objectRef(kind, req, meta) + ": " + strings.Join(msgs, "; ")
	return deny(resp, &status)
}

func deny(resp *admissionv1.AdmissionResponse, status *metav1.Status) *admissionv1.AdmissionResponse {
	resp.Allowed = false
	status.Status = metav1.StatusFailure
	resp.Result = status
	return resp
}

// objectRef is "Kind namespace/name", or "Kind name" for a cluster-scoped
// object; a name still to be generated shows as its prefix and "*".
func objectRef(kind schema.GroupVersionKind, req *admissionv1.AdmissionRequest, meta metav1.ObjectMeta) string {
	name := req.Name
	if name == "" {
		name = meta.Name
	}
	if name == "" && meta.GenerateName != "" {
		name = meta.GenerateName + "*"
	}
	if req.Namespace != "" {
		return kind.Kind + " " + req.Namespace + "/" + name
	}
	return kind.Kind + " " + name
}

func kindString(k schema.GroupVersionKind) string {
	if k.Group == "" {
		return k.Version + " " + k.Kind
	}
	return k.Group + "/" + k.Version + " " + k.Kind
}
