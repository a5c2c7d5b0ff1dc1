package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Cache lifetimes of the access reviews, the kubelet's defaults
// (--authorization-webhook-cache-authorized-ttl and -unauthorized-ttl): a
// right taken away still reads metrics for up to AllowedTTL; a right just
// granted works within DeniedTTL.
const (
	AllowedTTL = 5 * time.Minute
	DeniedTTL  = 30 * time.Second
)

// Authorizer says whether a user may use verb on a non-resource path.
type Authorizer interface {
	// Authorize returns whether user may, and the API server's reason when
	// it may not. An error is a review that could not be made.
	Authorize(ctx context.Context, user *authnv1.UserInfo, verb, path string) (allowed bool, reason string, err error)
}

// AccessReviewer authorizes with SubjectAccessReviews, caching answers.
type AccessReviewer struct {
	client            authzclient.SubjectAccessReviewInterface
	cache             *cache.LRUExpireCache
	allowTTL, denyTTL time.Duration
}

// NewAccessReviewer reviews access through client (the agent's own
// credentials, which need create on subjectaccessreviews).
func NewAccessReviewer(client authzclient.SubjectAccessReviewInterface) *AccessReviewer {
	return &AccessReviewer{client: client, cache: cache.NewLRUExpireCache(cacheSize), allowTTL: AllowedTTL, denyTTL: DeniedTTL}
}

// accessKey is everything a review depends on: the whole user (groups and
// extra too: two tokens of one name may carry different groups) and the
// request. Its JSON is the cache key (encoding/json sorts the extra's keys).
type accessKey struct {
	User   string              `json:"u"`
	UID    string              `json:"i"`
	Groups []string            `json:"g"`
	Extra  map[string][]string `json:"e"`
	Verb   string              `json:"v"`
	Path   string              `json:"p"`
}

// accessAnswer is a cached review.
type accessAnswer struct {
	allowed bool
	reason  string
}

// Authorize implements Authorizer.
func (a *AccessReviewer) Authorize(ctx context.Context, user *authnv1.UserInfo, verb, path string) (bool, string, error) {
	extra := map[string]authzv1.ExtraValue{}
	k := accessKey{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: map[string][]string{}, Verb: verb, Path: path}
	for name, v := range user.Extra {
		extra[name] = authzv1.ExtraValue(v)
		k.Extra[name] = v
	}
	raw, err := json.Marshal(k)
	if err != nil {
		return false, "", fmt.Errorf("access review key: %w", err)
	}
	key := string(raw)
	if v, ok := a.cache.Get(key); ok {
		ans := v.(accessAnswer)
		return ans.allowed, ans.reason, nil
	}
	sar, err := a.client.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		Extra:                 extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Verb: verb, Path: path},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	ans := accessAnswer{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason}
	ttl := a.denyTTL
	if ans.allowed {
		ttl = a.allowTTL
	}
	a.cache.Add(key, ans, ttl)
	return ans.allowed, ans.reason, nil
}
