package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
)

// maxReviewBytes bounds a review body: the API server's objects stay under
// etcd's 1.5 MiB default and a review carries two (object and oldObject).
const maxReviewBytes = 4 << 20

// admissionReviewV1 is the only review version the chart registers.
var admissionReviewV1 = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// NewHandler serves POST /validate (AdmissionReview admission.k8s.io/v1),
// GET /readyz (ready: ready returns nil) and GET /healthz (the process
// serves). A request that is no AdmissionReview gets HTTP 400 with the
// reason; the API server treats that as a failed call.
func NewHandler(logger klog.Logger, ready func() error) http.Handler {
	h := &handler{logger: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /validate", h.validate)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

type handler struct {
	logger klog.Logger
}

func (h *handler) validate(w http.ResponseWriter, r *http.Request) {
	in, code, err := readReview(w, r)
	if err != nil {
		h.logger.V(1).Info("Refused a malformed admission request", "remote", r.RemoteAddr, "status", code, "err", err)
		http.Error(w, err.Error(), code)
		return
	}
	req := in.Request
	resp := review(req)
	logger := h.logger.WithValues("uid", req.UID, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation)
	switch {
	case !resp.Allowed:
		logger.V(2).Info("Denied", "reason", resp.Result.Message)
	case len(resp.Warnings) > 0:
		logger.V(2).Info("Allowed with warnings", "warnings", resp.Warnings)
	default:
		logger.V(4).Info("Allowed")
	}
	out := admissionv1.AdmissionReview{Response: resp}
	out.APIVersion, out.Kind = admissionReviewV1.ToAPIVersionAndKind()
	data, err := json.Marshal(&out)
	if err != nil {
		logger.Error(err, "Encode AdmissionReview response")
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// readReview reads an AdmissionReview v1 with a request; otherwise it
// returns the HTTP status to answer and why.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, http.StatusBadRequest, fmt.Errorf("content type %q: want application/json", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body larger than %d bytes", tooLarge.Limit)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("decode AdmissionReview: %w", err)
	}
	if gvk := in.GroupVersionKind(); gvk != admissionReviewV1 {
		return nil, http.StatusBadRequest, fmt.Errorf("got apiVersion %q kind %q: want %s AdmissionReview", in.APIVersion, in.Kind, admissionv1.SchemeGroupVersion)
	}
	if in.Request == nil {
		return nil, http.StatusBadRequest, errors.New("AdmissionReview without request")
	}
	if in.Request.UID == "" {
		return nil, http.StatusBadRequest, errors.New("AdmissionReview request without uid")
	}
	return &in, 0, nil
}
