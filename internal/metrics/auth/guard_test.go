package auth_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/auth"
)

// apiServer is a fake API server's token and access reviews: tokens maps a
// token to its user, allowed names the users who may get /metrics.
type apiServer struct {
	tokens         map[string]authnv1.UserInfo
	allowed        map[string]bool
	tokenReviews   atomic.Int32
	accessReviews  atomic.Int32
	failTokens     atomic.Bool
	failAccess     atomic.Bool
	lastAccessSpec atomic.Pointer[authzv1.SubjectAccessReviewSpec]
}

func (s *apiServer) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.tokenReviews.Add(1)
		if s.failTokens.Load() {
			return true, nil, errors.New("connection refused")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if u, ok := s.tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: u}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.accessReviews.Add(1)
		if s.failAccess.Load() {
			return true, nil, errors.New("connection refused")
		}
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		spec := sar.Spec
		s.lastAccessSpec.Store(&spec)
		na := sar.Spec.NonResourceAttributes
		// RBAC's answer: a group binding counts as the user's own.
		ok := na != nil && na.Path == "/metrics" && na.Verb == "get" && sar.Spec.ResourceAttributes == nil &&
			(s.allowed[sar.Spec.User] || groupsAllowed(s.allowed, sar.Spec.Groups))
		sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: ok}
		if !ok {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	return c
}

func groupsAllowed(allowed map[string]bool, groups []string) bool {
	for _, g := range groups {
		if allowed[g] {
			return true
		}
	}
	return false
}

// newServer serves the agent's real handler with /metrics guarded, against
// s's reviews.
func newServer(t *testing.T, s *apiServer) *httptest.Server {
	c := s.client()
	m := metrics.New()
	g := &auth.Guard{
		Authn:  auth.NewTokenReviewer(c.AuthenticationV1().TokenReviews()),
		Authz:  auth.NewAccessReviewer(c.AuthorizationV1().SubjectAccessReviews()),
		Logger: ktesting.NewLogger(t, ktesting.DefaultConfig),
	}
	srv := httptest.NewServer(m.GuardedHandler(g.Wrap))
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	code int
	body string
}

func get(t *testing.T, srv *httptest.Server, method, path string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(body)}
}

func scraperAPI() *apiServer {
	return &apiServer{
		tokens: map[string]authnv1.UserInfo{
			"prometheus-token": {Username: "system:serviceaccount:monitoring:prometheus", UID: "p-1", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
			"tenant-token":     {Username: "system:serviceaccount:team-a:default", UID: "t-1", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
			"admin-token":      {Username: "alice", Groups: []string{"ops", "system:authenticated"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"metrics"}}},
		},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus": true, "ops": true},
	}
}

// TestGuard: who gets what on the agent's port with authentication on.
func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name         string
		method, path string
		header       []string
		want         int
		bodyHas      string
	}{
		{"anonymous", "GET", "/metrics", nil, http.StatusUnauthorized, "Unauthorized"},
		{"not a bearer token", "GET", "/metrics", []string{"Authorization", "Basic dXNlcjpwdw=="}, http.StatusUnauthorized, "Unauthorized"},
		{"empty bearer token", "GET", "/metrics", []string{"Authorization", "Bearer "}, http.StatusUnauthorized, "Unauthorized"},
		{"invalid token", "GET", "/metrics", []string{"Authorization", "Bearer forged"}, http.StatusUnauthorized, "Unauthorized"},
		{"tenant without the right", "GET", "/metrics", []string{"Authorization", "Bearer tenant-token"}, http.StatusForbidden, `"system:serviceaccount:team-a:default" cannot get path "/metrics"`},
		{"authorized scraper", "GET", "/metrics", []string{"Authorization", "Bearer prometheus-token"}, http.StatusOK, "tessera_prepared_claims"},
		{"bearer in any case", "GET", "/metrics", []string{"Authorization", "bearer prometheus-token"}, http.StatusOK, "tessera_prepared_claims"},
		{"authorized through a group", "GET", "/metrics", []string{"Authorization", "Bearer admin-token"}, http.StatusOK, "tessera_prepared_claims"},
		{"head", "HEAD", "/metrics", []string{"Authorization", "Bearer prometheus-token"}, http.StatusOK, ""},
		// The API server's pod proxy strips Authorization; kubectl
		// tessera top sends the caller's token here too.
		{"forwarded through the pod proxy", "GET", "/metrics", []string{auth.ForwardedAuthorizationHeader, "Bearer prometheus-token"}, http.StatusOK, "tessera_prepared_claims"},
		{"forwarded, without the right", "GET", "/metrics", []string{auth.ForwardedAuthorizationHeader, "Bearer tenant-token"}, http.StatusForbidden, "Forbidden"},
		{"a write", "POST", "/metrics", []string{"Authorization", "Bearer prometheus-token"}, http.StatusMethodNotAllowed, "method not allowed"},
		// The kubelet's probes carry no token.
		{"liveness stays open", "GET", "/healthz", nil, http.StatusOK, "ok"},
		{"readiness stays open", "GET", "/readyz", nil, http.StatusServiceUnavailable, "not ready: starting"},
		{"pprof is never here", "GET", "/debug/pprof/", []string{"Authorization", "Bearer prometheus-token"}, http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, scraperAPI())
			got := get(t, srv, tc.method, tc.path, tc.header...)
			if got.code != tc.want || !strings.Contains(got.body, tc.bodyHas) {
				t.Errorf("%s %s: %d %q, want %d with %q", tc.method, tc.path, got.code, got.body, tc.want, tc.bodyHas)
			}
		})
	}
}

// TestGuardReviewsWhatTheTokenSays: the access review asks about exactly
// the user the token review returned, for get on /metrics.
func TestGuardReviewsWhatTheTokenSays(t *testing.T) {
	api := scraperAPI()
	srv := newServer(t, api)
	if got := get(t, srv, "GET", "/metrics", "Authorization", "Bearer admin-token"); got.code != http.StatusOK {
		t.Fatalf("admin: %d %s", got.code, got.body)
	}
	spec := api.lastAccessSpec.Load()
	if spec == nil || spec.User != "alice" || strings.Join(spec.Groups, ",") != "ops,system:authenticated" ||
		len(spec.Extra["scopes"]) != 1 || spec.Extra["scopes"][0] != "metrics" ||
		spec.NonResourceAttributes == nil || *spec.NonResourceAttributes != (authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}) {
		t.Errorf("access review %+v", spec)
	}
}

// TestGuardCaches: answers are cached, each by what it depends on, so that
// a cached answer lets no other token or user through.
func TestGuardCaches(t *testing.T) {
	api := scraperAPI()
	srv := newServer(t, api)
	type step struct {
		token                    string
		want                     int
		tokenReviews, accessRevs int32 // totals after the step
	}
	for i, s := range []step{
		{"prometheus-token", 200, 1, 1},
		{"prometheus-token", 200, 1, 1}, // both cached
		{"tenant-token", 403, 2, 2},     // another token: reviewed, not the scraper's answer
		{"tenant-token", 403, 2, 2},     // the denial is cached too, and stays a denial
		{"forged", 401, 3, 2},
		{"forged", 401, 3, 2},           // the rejection is cached: no review per scrape
		{"prometheus-token", 200, 3, 2}, // the denials changed nothing of it
		// A token that differs from the cached one only at its end.
		{"prometheus-tokeN", 401, 4, 2},
	} {
		got := get(t, srv, "GET", "/metrics", "Authorization", "Bearer "+s.token)
		if got.code != s.want {
			t.Errorf("step %d, %s: %d, want %d", i, s.token, got.code, s.want)
		}
		if tr, ar := api.tokenReviews.Load(), api.accessReviews.Load(); tr != s.tokenReviews || ar != s.accessRevs {
			t.Errorf("step %d, %s: %d token and %d access reviews so far, want %d and %d", i, s.token, tr, ar, s.tokenReviews, s.accessRevs)
		}
	}
}

// TestGuardFailsClosed: a review that cannot be made lets nothing through
// and is not cached: the next request asks again.
func TestGuardFailsClosed(t *testing.T) {
	api := scraperAPI()
	srv := newServer(t, api)
	api.failTokens.Store(true)
	if got := get(t, srv, "GET", "/metrics", "Authorization", "Bearer prometheus-token"); got.code != http.StatusUnauthorized {
		t.Errorf("token review failing: %d, want 401", got.code)
	}
	api.failTokens.Store(false)
	api.failAccess.Store(true)
	if got := get(t, srv, "GET", "/metrics", "Authorization", "Bearer prometheus-token"); got.code != http.StatusInternalServerError {
		t.Errorf("access review failing: %d, want 500", got.code)
	}
	api.failAccess.Store(false)
	if got := get(t, srv, "GET", "/metrics", "Authorization", "Bearer prometheus-token"); got.code != http.StatusOK {
		t.Errorf("reviews back: %d, want 200", got.code)
	}
	if tr, ar := api.tokenReviews.Load(), api.accessReviews.Load(); tr != 2 || ar != 2 {
		t.Errorf("%d token and %d access reviews, want 2 and 2 (failures are not cached)", tr, ar)
	}
}
