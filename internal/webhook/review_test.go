package webhook

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReview(t *testing.T) {
	const (
		threads101 = "spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100"
	)
	tests := []struct {
		name   string
		review []byte
		// allowed: wantMsg empty. denied: the exact message.
		wantMsg  string
		wantCode int32
		// wantCauses are the fields of the denial's causes, in order.
		wantCauses []string
		// wantWarnings are substrings, one per warning.
		wantWarnings []string
	}{
		// ResourceClaim.
		{
			name:   "claim time-slicing long",
			review: reviewJSON(claimInfo, "CREATE", "default", "good", claimJSON("default", "good", tessera(timeSlicingLong)), ""),
		},
		{
			name:   "claim MPS with limits",
			review: reviewJSON(claimInfo, "CREATE", "default", "good", claimJSON("default", "good", tessera(mpsGood, "gpu")), ""),
		},
		{
			name:       "claim bad threads",
			review:     reviewJSON(claimInfo, "CREATE", "default", "bad", claimJSON("default", "bad", tessera(mpsThreads101)), ""),
			wantMsg:    "ResourceClaim default/bad: " + threads101,
			wantCode:   http.StatusUnprocessableEntity,
			wantCauses: []string{"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage"},
		},
		{
			name:   "claim without config",
			review: reviewJSON(claimInfo, "CREATE", "default", "plain", claimJSON("default", "plain"), ""),
		},
		{
			name:   "claim with another driver's config only",
			review: reviewJSON(claimInfo, "CREATE", "default", "other", claimJSON("default", "other", entry("other.example.com", `{"kind":"GpuConfig","junk":true}`)), ""),
		},
		{
			name:   "claim with a config entry without opaque",
			review: reviewJSON(claimInfo, "CREATE", "default", "empty", claimJSON("default", "empty", `{"requests":["gpu"]}`), ""),
		},
		{
			name: "claim: the other driver's entry is skipped, the index is the entry's",
			review: reviewJSON(claimInfo, "CREATE", "default", "mixed", claimJSON("default", "mixed",
				entry("other.example.com", `{"whatever":1}`), tessera(mpsThreads101)), ""),
			wantMsg:    "ResourceClaim default/mixed: spec.devices.config[1].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100",
			wantCode:   http.StatusUnprocessableEntity,
			wantCauses: []string{"spec.devices.config[1].opaque.parameters.sharing.mps.defaultActiveThreadPercentage"},
		},
		{
			name: "claim: every error of every entry",
			review: reviewJSON(claimInfo, "CREATE", "ml", "many", claimJSON("ml", "many",
				tessera(mpsTwoBad), tessera(timeSlicingLong), tessera(partitionShort), tessera(unknownField), tessera(otherVersion)), ""),
			wantMsg: "ResourceClaim ml/many: " +
				"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 0: must be between 1 and 100; " +
				`spec.devices.config[0].opaque.parameters.sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value: "1Mi": must be at least 256Mi; ` +
				`spec.devices.config[2].opaque.parameters.sharing.timeSlicing.interval: Invalid value: "Short": a partition has no time-slice interval of its own (it is a whole-GPU setting); use Default or set it with a GpuConfig on a whole GPU; ` +
				`spec.devices.config[3].opaque.parameters: Invalid value: GpuConfig: unknown field "sharing.mps.threads"; ` +
				`spec.devices.config[4].opaque.parameters.apiVersion: Unsupported value: "gpu.tessera.dev/v1": supported values: "gpu.tessera.dev/v1alpha1"`,
			wantCode: http.StatusUnprocessableEntity,
			wantCauses: []string{
				"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage",
				"spec.devices.config[0].opaque.parameters.sharing.mps.defaultPinnedDeviceMemoryLimit",
				"spec.devices.config[2].opaque.parameters.sharing.timeSlicing.interval",
				"spec.devices.config[3].opaque.parameters",
				"spec.devices.config[4].opaque.parameters.apiVersion",
			},
		},
		{
			name:       "claim: not JSON parameters",
			review:     reviewJSON(claimInfo, "CREATE", "default", "str", claimJSON("default", "str", tessera(`"just a string"`)), ""),
			wantMsg:    "ResourceClaim default/str: spec.devices.config[0].opaque.parameters: Invalid value: json: cannot unmarshal string into Go value of type v1alpha1.TypeMeta",
			wantCode:   http.StatusUnprocessableEntity,
			wantCauses: []string{"spec.devices.config[0].opaque.parameters"},
		},
		{
			name:       "claim to be named by the API server",
			review:     reviewJSON(claimInfo, "CREATE", "default", "", strings.Replace(claimJSON("default", "", tessera(mpsThreads101)), `"name":""`, `"generateName":"pod-gpu-"`, 1), ""),
			wantMsg:    "ResourceClaim default/pod-gpu-*: " + threads101,
			wantCode:   http.StatusUnprocessableEntity,
			wantCauses: []string{"spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage"},
		},
		{
			name: "claim update keeping a stored bad config (e.g. removing a finalizer) warns",
			review: reviewJSON(claimInfo, "UPDATE", "default", "old",
				claimJSON("default", "old", tessera(mpsThreads101)),
				// Stored before the webhook, and encoded with another key order.
				claimJSON("default", "old", tessera(`{"kind":"GpuConfig","sharing":{"mps":{"defaultActiveThreadPercentage":101},"strategy":"MPS"},"apiVersion":"gpu.tessera.dev/v1alpha1"}`))),
			wantWarnings: []string{"spec.devices.config[0].opaque.parameters is invalid but unchanged from the stored object, so it is allowed: " + threads101},
		},
		{
			name:   "claim update with good config",
			review: reviewJSON(claimInfo, "UPDATE", "default", "good", claimJSON("default", "good", tessera(mpsGood)), claimJSON("default", "good", tessera(mpsGood))),
		},

		// ResourceClaimTemplate.
		{
			name:   "template good",
			review: reviewJSON(templateInfo, "CREATE", "default", "tmpl", templateJSON("default", "tmpl", tessera(mpsGood)), ""),
		},
		{
			name:       "template bad",
			review:     reviewJSON(templateInfo, "CREATE", "default", "tmpl", templateJSON("default", "tmpl", tessera(mpsThreads101)), ""),
			wantMsg:    "ResourceClaimTemplate default/tmpl: spec.spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100",
			wantCode:   http.StatusUnprocessableEntity,
			wantCauses: []string{"spec.spec.devices.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage"},
		},
		{
			name:   "template without config",
			review: reviewJSON(templateInfo, "CREATE", "default", "tmpl", templateJSON("default", "tmpl"), ""),
		},
		{
			name:   "template with another driver's config",
			review: reviewJSON(templateInfo, "CREATE", "default", "tmpl", templateJSON("default", "tmpl", entry("other.example.com", mpsThreads101)), ""),
		},

		// DeviceClass (cluster-scoped).
		{
			name:   "class good",
			review: reviewJSON(classInfo, "CREATE", "", "shared", classJSON("shared", tessera(timeSlicingLong)), ""),
		},
		{
			name:       "class bad",
			review:     reviewJSON(classInfo, "CREATE", "", "bad-class", classJSON("bad-class", tessera(`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Spatial"}}`)), ""),
			wantMsg:    `DeviceClass bad-class: spec.config[0].opaque.parameters.sharing.strategy: Unsupported value: "Spatial": supported values: "TimeSlicing", "MPS"`,
			wantCode:   http.StatusUnprocessableEntity,
			wantCauses: []string{"spec.config[0].opaque.parameters.sharing.strategy"},
		},
		{
			name:   "class without config",
			review: reviewJSON(classInfo, "CREATE", "", "plain", classJSON("plain"), ""),
		},
		{
			name:   "class with another driver's config",
			review: reviewJSON(classInfo, "CREATE", "", "other", classJSON("other", entry("other.example.com", `{}`)), ""),
		},
		{
			name:       "class update to a bad config",
			review:     reviewJSON(classInfo, "UPDATE", "", "shared", classJSON("shared", tessera(mpsThreads101)), classJSON("shared", tessera(timeSlicingLong))),
			wantMsg:    "DeviceClass shared: spec.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100",
			wantCode:   http.StatusUnprocessableEntity,
			wantCauses: []string{"spec.config[0].opaque.parameters.sharing.mps.defaultActiveThreadPercentage"},
		},
		{
			name:         "class update adding a bad config next to a stored one: only the new one is refused",
			review:       reviewJSON(classInfo, "UPDATE", "", "shared", classJSON("shared", tessera(mpsThreads101), tessera(partitionShort)), classJSON("shared", tessera(mpsThreads101))),
			wantMsg:      `DeviceClass shared: spec.config[1].opaque.parameters.sharing.timeSlicing.interval: Invalid value: "Short": a partition has no time-slice interval of its own (it is a whole-GPU setting); use Default or set it with a GpuConfig on a whole GPU`,
			wantCode:     http.StatusUnprocessableEntity,
			wantCauses:   []string{"spec.config[1].opaque.parameters.sharing.timeSlicing.interval"},
			wantWarnings: []string{"spec.config[0].opaque.parameters is invalid but unchanged"},
		},

		// What the webhook was not registered for: allowed, with a warning.
		{
			name:         "another kind",
			review:       reviewJSON(podInfo, "CREATE", "default", "p", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`, ""),
			wantWarnings: []string{"does not validate v1 Pod"},
		},
		{
			name:         "another version",
			review:       reviewJSON(kindInfo{"resource.k8s.io", "v1beta2", "ResourceClaim", "resourceclaims"}, "CREATE", "default", "bad", claimJSON("default", "bad", tessera(mpsThreads101)), ""),
			wantWarnings: []string{"does not validate resource.k8s.io/v1beta2 ResourceClaim"},
		},
		{
			name:         "delete",
			review:       reviewJSON(claimInfo, "DELETE", "default", "bad", "null", claimJSON("default", "bad", tessera(mpsThreads101))),
			wantWarnings: []string{"does not validate DELETE"},
		},

		// An object that is not its kind (the API server never sends one).
		{
			name:     "undecodable object",
			review:   reviewJSON(claimInfo, "CREATE", "default", "odd", `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"odd"},"spec":"gpu"}`, ""),
			wantMsg:  "ResourceClaim default/odd: decode ResourceClaim: json: cannot unmarshal string into Go struct field ResourceClaim.spec of type v1.ResourceClaimSpec",
			wantCode: http.StatusBadRequest,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in admissionv1.AdmissionReview
			if err := json.Unmarshal(tc.review, &in); err != nil {
				t.Fatalf("test review: %v\n%s", err, tc.review)
			}
			resp := review(in.Request)
			if resp.UID != in.Request.UID {
				t.Errorf("uid %q, want the request's %q", resp.UID, in.Request.UID)
			}
			checkResponse(t, resp, tc.wantMsg, tc.wantCode, tc.wantCauses, tc.wantWarnings)
		})
	}
}

func checkResponse(t *testing.T, resp *admissionv1.AdmissionResponse, wantMsg string, wantCode int32, wantCauses, wantWarnings []string) {
	t.Helper()
	if wantMsg == "" {
		if !resp.Allowed {
			t.Errorf("denied: %+v", resp.Result)
		}
	} else {
		switch {
		case resp.Allowed:
			t.Errorf("allowed, want denied with %q", wantMsg)
		case resp.Result == nil:
			t.Error("denied without a result")
		default:
			r := resp.Result
			if r.Message != wantMsg {
				t.Errorf("message\n%s\nwant\n%s", r.Message, wantMsg)
			}
			if r.Code != wantCode || r.Status != metav1.StatusFailure {
				t.Errorf("code %d status %q, want %d Failure", r.Code, r.Status, wantCode)
			}
			var causes []string
			if r.Details != nil {
				for _, c := range r.Details.Causes {
					causes = append(causes, c.Field)
				}
			}
			if !reflect.DeepEqual(causes, wantCauses) {
				t.Errorf("causes %q, want %q", causes, wantCauses)
			}
		}
	}
	if len(resp.Warnings) != len(wantWarnings) {
		t.Fatalf("warnings %q, want %d containing %q", resp.Warnings, len(wantWarnings), wantWarnings)
	}
	for i, w := range wantWarnings {
		if !strings.Contains(resp.Warnings[i], w) {
			t.Errorf("warning %q lacks %q", resp.Warnings[i], w)
		}
	}
}
