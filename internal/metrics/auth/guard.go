package auth

import (
	"fmt"
	"net/http"

	"k8s.io/klog/v2"
)

// Guard lets a request through to the handler it wraps only with a bearer
// token of a user allowed to get the request's path: 401 without a token
// or with one the API server does not accept, 403 for a user without the
// right, 500 when a review cannot be made (nothing is let through then).
type Guard struct {
	Authn  Authenticator
	Authz  Authorizer
	Logger klog.Logger
}

// Wrap guards next.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A scrape only reads; the exposition answers any method alike,
		// so only GET is authorized and served (HEAD is GET's).
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		token := bearerToken(r)
		if token == "" {
			unauthorized(w)
			return
		}
		user, ok, err := g.Authn.Authenticate(r.Context(), token)
		if err != nil {
			g.Logger.Error(err, "Cannot authenticate a metrics request", "path", r.URL.Path, "remote", r.RemoteAddr)
			unauthorized(w)
			return
		}
		if !ok {
			g.Logger.V(4).Info("Metrics request with a token the API server rejects", "path", r.URL.Path, "remote", r.RemoteAddr)
			unauthorized(w)
			return
		}
		allowed, reason, err := g.Authz.Authorize(r.Context(), user, "get", r.URL.Path)
		if err != nil {
			g.Logger.Error(err, "Cannot authorize a metrics request", "user", user.Username, "path", r.URL.Path)
			http.Error(w, "Internal Server Error: authorization could not be checked", http.StatusInternalServerError)
			return
		}
		if !allowed {
			g.Logger.V(4).Info("Metrics request denied: the user may not get the path", "user", user.Username, "path", r.URL.Path, "reason", reason)
			msg := fmt.Sprintf("Forbidden: user %q cannot get path %q", user.Username, r.URL.Path)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unauthorized answers 401 as the API server does, saying which scheme.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tessera-kubelet-plugin"`)
	http.Error(w, "Unauthorized", http.StatusUnauthorized)
}
