package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2/ktesting"
)

func serve(t *testing.T, h http.Handler, method, path, contentType string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerValidate(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	h := NewHandler(logger, func() error { return nil })

	t.Run("a whole review as the API server sends it", func(t *testing.T) {
		body, err := os.ReadFile("testdata/claim-create-bad.json")
		if err != nil {
			t.Fatal(err)
		}
		w := serve(t, h, http.MethodPost, "/validate", "application/json", body)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("HTTP %d %s: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Request != nil || out.Response == nil {
			t.Fatalf("response review %s", w.Body)
		}
		if out.Response.UID != "0b1f6a9e-5a4c-4f43-9d2e-7f3c1a2b4c5d" {
			t.Errorf("uid %q", out.Response.UID)
		}
		checkResponse(t, out.Response,
			"ResourceClaim default/bad: spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100",
			http.StatusUnprocessableEntity,
			[]string{"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage"}, nil)
	})

	t.Run("allowed", func(t *testing.T) {
		w := serve(t, h, http.MethodPost, "/validate", "application/json; charset=utf-8",
			reviewJSON(claimInfo, "CREATE", "default", "good", claimJSON("default", "good", tessera(mpsGood)), ""))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != http.StatusOK {
			t.Fatalf("HTTP %d: %s (%v)", w.Code, w.Body, err)
		}
		if !out.Response.Allowed || out.Response.Result != nil || len(out.Response.Warnings) != 0 {
			t.Errorf("response %+v", out.Response)
		}
	})

	good := reviewJSON(claimInfo, "CREATE", "default", "good", claimJSON("default", "good", tessera(mpsGood)), "")
	for _, tc := range []struct {
		name        string
		method      string
		contentType string
		body        []byte
		wantCode    int
		wantBody    string
	}{
		{"GET", http.MethodGet, "application/json", good, http.StatusMethodNotAllowed, ""},
		{"no content type", http.MethodPost, "", good, http.StatusBadRequest, "want application/json"},
		{"wrong content type", http.MethodPost, "application/yaml", good, http.StatusBadRequest, `content type "application/yaml"`},
		{"malformed JSON", http.MethodPost, "application/json", good[:len(good)/2], http.StatusBadRequest, "decode AdmissionReview"},
		{"not JSON", http.MethodPost, "application/json", []byte("kind: AdmissionReview"), http.StatusBadRequest, "decode AdmissionReview"},
		{"empty body", http.MethodPost, "application/json", nil, http.StatusBadRequest, "decode AdmissionReview"},
		{"v1beta1 review", http.MethodPost, "application/json", bytes.Replace(good, []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1), http.StatusBadRequest, `got apiVersion "admission.k8s.io/v1beta1"`},
		{"not a review", http.MethodPost, "application/json", []byte(`{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1"}`), http.StatusBadRequest, "want admission.k8s.io/v1 AdmissionReview"},
		{"no request", http.MethodPost, "application/json", []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`), http.StatusBadRequest, "without request"},
		{"no uid", http.MethodPost, "application/json", bytes.Replace(good, []byte(`"uid":"0b1f6a9e-5a4c-4f43-9d2e-000000000001",`), nil, 1), http.StatusBadRequest, "without uid"},
		{"too large", http.MethodPost, "application/json", []byte(`{"kind":"` + strings.Repeat("x", maxReviewBytes) + `"}`), http.StatusRequestEntityTooLarge, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(t, h, tc.method, "/validate", tc.contentType, tc.body)
			if w.Code != tc.wantCode || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf("HTTP %d %q, want %d with %q", w.Code, w.Body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestHandlerProbes(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	var readyErr error
	h := NewHandler(logger, func() error { return readyErr })
	for _, tc := range []struct {
		path     string
		ready    error
		wantCode int
		wantBody string
	}{
		{"/readyz", nil, http.StatusOK, "ok\n"},
		{"/readyz", errors.New("certificate expired"), http.StatusServiceUnavailable, "not ready: certificate expired\n"},
		{"/healthz", errors.New("certificate expired"), http.StatusOK, "ok\n"},
		{"/", nil, http.StatusNotFound, ""},
	} {
		readyErr = tc.ready
		w := serve(t, h, http.MethodGet, tc.path, "", nil)
		if w.Code != tc.wantCode || (tc.wantBody != "" && w.Body.String() != tc.wantBody) {
			t.Errorf("GET %s (ready: %v): HTTP %d %q, want %d %q", tc.path, tc.ready, w.Code, w.Body, tc.wantCode, tc.wantBody)
		}
	}
}
