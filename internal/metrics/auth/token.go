package auth

import (
	"net/http"
	"strings"

	"github.com/tessera-gpu/tessera/internal/names"
)

// ForwardedAuthorizationHeader is where a token comes through the API
// server's pods/proxy, which consumes Authorization (names has why).
// Accepting it grants nothing Authorization would not: the token is
// reviewed all the same.
const ForwardedAuthorizationHeader = names.ForwardedAuthorizationHeader

// bearerToken is the request's bearer token: from Authorization, else from
// ForwardedAuthorizationHeader; "" when neither holds one.
func bearerToken(r *http.Request) string {
	for _, h := range []string{"Authorization", ForwardedAuthorizationHeader} {
		scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get(h)), " ")
		if ok && strings.EqualFold(scheme, "bearer") {
			if token = strings.TrimSpace(token); token != "" {
				return token
			}
		}
	}
	return ""
}
