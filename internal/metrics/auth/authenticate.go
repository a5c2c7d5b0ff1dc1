package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// Cache lifetimes of the token reviews, the kubelet's defaults
// (--authentication-token-webhook-cache-ttl): an agent is a per-node
// component like the kubelet, and at a scrape every 30 s a fleet of agents
// costs the API server one review per agent every two minutes. A token
// revoked or expired is still accepted for up to TokenTTL. A rejected token
// is remembered briefly, so that a scraper with a stale token does not
// send a review per scrape, and not long, so that a token just issued soon
// works.
const (
	TokenTTL       = 2 * time.Minute
	TokenFailedTTL = 10 * time.Second
)

// cacheSize bounds each cache: a node is scraped by a few Prometheus
// replicas and now and then a person; more distinct tokens than this only
// cost reviews.
const cacheSize = 1024

// Authenticator says which user a bearer token is.
type Authenticator interface {
	// Authenticate returns the token's user and true, or false for a
	// token the API server does not accept. An error is a review that
	// could not be made: nothing is known of the token.
	Authenticate(ctx context.Context, token string) (*authnv1.UserInfo, bool, error)
}

// TokenReviewer authenticates tokens with TokenReviews, caching answers.
type TokenReviewer struct {
	client             authnclient.TokenReviewInterface
	cache              *cache.LRUExpireCache
	okTTL, rejectedTTL time.Duration
}

// NewTokenReviewer reviews tokens through client (the agent's own
// credentials, which need create on tokenreviews).
func NewTokenReviewer(client authnclient.TokenReviewInterface) *TokenReviewer {
	return &TokenReviewer{client: client, cache: cache.NewLRUExpireCache(cacheSize), okTTL: TokenTTL, rejectedTTL: TokenFailedTTL}
}

// tokenAnswer is a cached review.
type tokenAnswer struct {
	user *authnv1.UserInfo
	ok   bool
}

// Authenticate implements Authenticator. The cache is keyed by the token's
// SHA-256, so the agent's memory holds no token.
func (a *TokenReviewer) Authenticate(ctx context.Context, token string) (*authnv1.UserInfo, bool, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := a.cache.Get(key); ok {
		ans := v.(tokenAnswer)
		return ans.user, ans.ok, nil
	}
	// No audiences: the API server checks the token is meant for it,
	// which is what a scraper's service account token is.
	tr, err := a.client.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	ans := tokenAnswer{ok: tr.Status.Authenticated}
	ttl := a.rejectedTTL
	if ans.ok {
		u := tr.Status.User
		ans.user, ttl = &u, a.okTTL
	}
	a.cache.Add(key, ans, ttl)
	return ans.user, ans.ok, nil
}
