package projected

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's token manager: a token is refreshed once 80% of its
// lifetime has passed or it is 24h old, less a jitter of up to 10s so that
// the tokens of many pods are not all requested at once.
const (
	maxTTL         = 24 * time.Hour
	maxJitter      = 10 * time.Second
	refreshPercent = 20 // refresh when 20% of the lifetime is left
)

// DefaultExpirationSeconds is a token's lifetime when its projection sets
// none: the API's default (1h).
const DefaultExpirationSeconds = 3600

// tokenKey identifies a cached token: the kubelet's key (service account,
// audiences, lifetime, bound pod).
type tokenKey struct {
	namespace, serviceAccount, audience string
	expirationSeconds                   int64
	podName                             string
	podUID                              types.UID
}

// tokens caches the service-account tokens of the volumes set up, as the
// kubelet's token manager. It is safe for concurrent use.
type tokens struct {
	create func(ctx context.Context, namespace, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	log    logr.Logger

	mu    sync.Mutex
	cache map[tokenKey]*authenticationv1.TokenRequest
}

// get returns the cached token for key, or requests a new one when there
// is none or it is due for refresh. When the request fails and the cached
// token has not expired, it is returned (logged).
func (t *tokens) get(ctx context.Context, key tokenKey) (*authenticationv1.TokenRequest, error) {
	now := time.Now()
	t.mu.Lock()
	cached := t.cache[key]
	// Drop every expired token: their pods are gone or will ask again.
	for k, tr := range t.cache {
		if expired(tr, now) {
			delete(t.cache, k)
		}
	}
	t.mu.Unlock()
	if cached != nil && !requiresRefresh(cached, now, jitter()) {
		return cached, nil
	}
	tr, err := t.request(ctx, key)
	if err != nil {
		if cached != nil && !expired(cached, now) {
			t.log.Info("Refreshing a service account token failed; keeping the current one", "namespace", key.namespace, "serviceAccount", key.serviceAccount, "podUID", key.podUID, "expires", cached.Status.ExpirationTimestamp.Time, "err", err.Error())
			return cached, nil
		}
		return nil, err
	}
	t.mu.Lock()
	if t.cache == nil {
		t.cache = map[tokenKey]*authenticationv1.TokenRequest{}
	}
	t.cache[key] = tr
	t.mu.Unlock()
	return tr, nil
}

func (t *tokens) request(ctx context.Context, key tokenKey) (*authenticationv1.TokenRequest, error) {
	exp := key.expirationSeconds
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{
			APIVersion: "v1",
			Kind:       "Pod",
			Name:       key.podName,
			UID:        key.podUID,
		},
	}}
	if key.audience != "" {
		req.Spec.Audiences = []string{key.audience}
	}
	tr, err := t.create(ctx, key.namespace, key.serviceAccount, req)
	if err != nil {
		return nil, fmt.Errorf("requesting a token for service account %s/%s: %w", key.namespace, key.serviceAccount, err)
	}
	if tr == nil || tr.Status.Token == "" || tr.Status.ExpirationTimestamp.IsZero() {
		return nil, fmt.Errorf("requesting a token for service account %s/%s: %w", key.namespace, key.serviceAccount, errors.New("the answer has no token or no expiration"))
	}
	tr = tr.DeepCopy()
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = &exp
	}
	return tr, nil
}

// forget drops the tokens bound to a pod.
func (t *tokens) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cache {
		if k.podUID == uid {
			delete(t.cache, k)
		}
	}
}

// len is the number of cached tokens.
func (t *tokens) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cache)
}

func expired(tr *authenticationv1.TokenRequest, now time.Time) bool {
	return !now.Before(tr.Status.ExpirationTimestamp.Time)
}

// requiresRefresh is the kubelet's: a token is refreshed when it is older
// than 24h or less than 20% of its lifetime is left, each less jitter.
func requiresRefresh(tr *authenticationv1.TokenRequest, now time.Time, jitter time.Duration) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	iat := exp.Add(-ttl)
	if now.After(iat.Add(maxTTL - jitter)) {
		return true
	}
	return now.After(exp.Add(-ttl*refreshPercent/100 - jitter))
}

// jitter is a whole number of seconds below maxJitter, as the kubelet's.
func jitter() time.Duration {
	return time.Duration(rand.Float64()*maxJitter.Seconds()) * time.Second
}
