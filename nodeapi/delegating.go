package nodeapi

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/nodekit/nodekit/kubeclient"
)

// The kubelet's defaults for its authentication and authorization caches.
const (
	DefaultAuthnCacheTTL        = 2 * time.Minute
	DefaultAuthzAllowedCacheTTL = 5 * time.Minute
	DefaultAuthzDeniedCacheTTL  = 30 * time.Second

	// Well-known groups.
	groupAuthenticated   = "system:authenticated"
	groupUnauthenticated = "system:unauthenticated"
	userAnonymous        = "system:anonymous"
)

// AuthOptions configure NewDelegatingAuth, the kubelet's authentication
// (x509 client certificates, bearer tokens through TokenReview, optional
// anonymous) and authorization (SubjectAccessReview).
type AuthOptions struct {
	// ClientCAFile holds the PEM CA bundle client certificates are
	// verified against (the kubelet's --client-ca-file). Without it and
	// ClientCAs, client certificates authenticate no one.
	ClientCAFile string
	// ClientCAs is the CA pool itself, instead of ClientCAFile.
	ClientCAs *x509.CertPool
	// Anonymous accepts requests without credentials as system:anonymous
	// (they are then authorized as such). Defaults to false: 401.
	Anonymous bool
	// AuthnCacheTTL is how long a TokenReview result is reused. Defaults
	// to 2 minutes; negative disables the cache.
	AuthnCacheTTL time.Duration
	// AuthzAllowedCacheTTL and AuthzDeniedCacheTTL are how long a
	// SubjectAccessReview's allow and deny are reused. Default to 5
	// minutes and 30 seconds; negative disables.
	AuthzAllowedCacheTTL time.Duration
	AuthzDeniedCacheTTL  time.Duration
	// Clock expires cache entries. Defaults to the real clock.
	Clock clock.PassiveClock
}

// NewDelegatingAuth returns the kubelet's authentication and
// authorization, delegated to the API server through client, which needs
// create on tokenreviews and subjectaccessreviews (the kubelet's node
// credentials have both; so does the system:auth-delegator ClusterRole).
func NewDelegatingAuth(client kubeclient.Interface, opts AuthOptions) (*Auth, error) {
	if client == nil {
		return nil, errors.New("nodeapi: NewDelegatingAuth needs a client")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	ttl := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	ttl(&opts.AuthnCacheTTL, DefaultAuthnCacheTTL)
	ttl(&opts.AuthzAllowedCacheTTL, DefaultAuthzAllowedCacheTTL)
	ttl(&opts.AuthzDeniedCacheTTL, DefaultAuthzDeniedCacheTTL)
	pool := opts.ClientCAs
	if pool == nil && opts.ClientCAFile != "" {
		pem, err := os.ReadFile(opts.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("nodeapi: client CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("nodeapi: client CA %s holds no PEM certificate", opts.ClientCAFile)
		}
	}
	var authns []Authenticator
	if pool != nil {
		authns = append(authns, &X509Authenticator{Roots: pool})
	}
	authns = append(authns, &TokenReviewAuthenticator{Client: client, CacheTTL: opts.AuthnCacheTTL, Clock: opts.Clock})
	return &Auth{
		Authenticator: UnionAuthenticator{Authenticators: authns, Anonymous: opts.Anonymous},
		Authorizer: &SubjectAccessReviewAuthorizer{Client: client,
			AllowedTTL: opts.AuthzAllowedCacheTTL, DeniedTTL: opts.AuthzDeniedCacheTTL, Clock: opts.Clock},
	}, nil
}

// UnionAuthenticator tries each authenticator in turn; the first to
// accept the request wins, and its user joins system:authenticated.
// With none accepting, Anonymous makes the request system:anonymous.
type UnionAuthenticator struct {
	Authenticators []Authenticator
	Anonymous      bool
}

// AuthenticateRequest implements Authenticator.
func (u UnionAuthenticator) AuthenticateRequest(r *http.Request) (*UserInfo, bool, error) {
	var errs []error
	for _, a := range u.Authenticators {
		user, ok, err := a.AuthenticateRequest(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			withGroup := *user
			withGroup.Groups = append(append([]string(nil), user.Groups...), groupAuthenticated)
			return &withGroup, true, nil
		}
	}
	if len(errs) > 0 {
		return nil, false, errors.Join(errs...)
	}
	if u.Anonymous {
		return &UserInfo{Name: userAnonymous, Groups: []string{groupUnauthenticated}}, true, nil
	}
	return nil, false, nil
}

// X509Authenticator authenticates a client certificate verified against
// Roots for client authentication: the user is its common name, the
// groups its organizations.
type X509Authenticator struct {
	Roots *x509.CertPool
}

// AuthenticateRequest implements Authenticator.
func (a *X509Authenticator) AuthenticateRequest(r *http.Request) (*UserInfo, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	certs := r.TLS.PeerCertificates
	opts := x509.VerifyOptions{
		Roots:         a.Roots,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return nil, false, fmt.Errorf("nodeapi: verifying certificate %q: %w", certs[0].Subject.CommonName, err)
	}
	if certs[0].Subject.CommonName == "" {
		return nil, false, errors.New("nodeapi: client certificate has no common name")
	}
	return &UserInfo{Name: certs[0].Subject.CommonName, Groups: append([]string(nil), certs[0].Subject.Organization...)}, true, nil
}

// ttlCache is a bounded cache of results with an expiry each.
type ttlCache struct {
	mu  sync.Mutex
	lru *lru.Cache
}

type cacheEntry struct {
	value   any
	expires time.Time
}

func newTTLCache(size int) *ttlCache { return &ttlCache{lru: lru.New(size)} }

func (c *ttlCache) get(key string, now time.Time) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.lru.Get(key)
	if !ok {
		return nil, false
	}
	e := v.(cacheEntry)
	if !now.Before(e.expires) {
		c.lru.Remove(key)
		return nil, false
	}
	return e.value, true
}

func (c *ttlCache) add(key string, v any, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Add(key, cacheEntry{value: v, expires: expires})
}

// TokenReviewAuthenticator authenticates a bearer token through the API
// server's TokenReview, caching each answer (accepted or not) for
// CacheTTL; errors are not cached.
type TokenReviewAuthenticator struct {
	Client kubeclient.Interface
	// CacheTTL; zero or negative disables the cache.
	CacheTTL time.Duration
	Clock    clock.PassiveClock

	once  sync.Once
	cache *ttlCache
}

type tokenResult struct {
	user *UserInfo
	ok   bool
}

// AuthenticateRequest implements Authenticator.
func (a *TokenReviewAuthenticator) AuthenticateRequest(r *http.Request) (*UserInfo, bool, error) {
	h := r.Header.Get("Authorization")
	scheme, token, found := strings.Cut(strings.TrimSpace(h), " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return nil, false, nil
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, false, nil
	}
	a.once.Do(func() { a.cache = newTTLCache(4096) })
	clk := a.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if a.CacheTTL > 0 {
		if v, ok := a.cache.get(key, clk.Now()); ok {
			res := v.(tokenResult)
			return res.user, res.ok, nil
		}
	}
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(r.Context(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("nodeapi: token review: %w", err)
	}
	res := tokenResult{ok: tr.Status.Authenticated}
	if res.ok {
		u := tr.Status.User
		res.user = &UserInfo{Name: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			res.user.Extra = map[string][]string{}
			for k, v := range u.Extra {
				res.user.Extra[k] = v
			}
		}
	}
	if a.CacheTTL > 0 {
		a.cache.add(key, res, clk.Now().Add(a.CacheTTL))
	}
	return res.user, res.ok, nil
}

// SubjectAccessReviewAuthorizer authorizes through the API server's
// SubjectAccessReview, caching allows for AllowedTTL and denials for
// DeniedTTL; errors are not cached.
type SubjectAccessReviewAuthorizer struct {
	Client     kubeclient.Interface
	AllowedTTL time.Duration
	DeniedTTL  time.Duration
	Clock      clock.PassiveClock

	once  sync.Once
	cache *ttlCache
}

type authzResult struct {
	allowed bool
	reason  string
}

// Authorize implements Authorizer.
func (a *SubjectAccessReviewAuthorizer) Authorize(ctx context.Context, at Attributes) (bool, string, error) {
	a.once.Do(func() { a.cache = newTTLCache(8192) })
	clk := a.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: at.Verb, Version: at.APIVersion, Resource: at.Resource, Subresource: at.Subresource, Name: at.Name,
		},
	}
	if at.User != nil {
		spec.User, spec.UID, spec.Groups = at.User.Name, at.User.UID, at.User.Groups
		if len(at.User.Extra) > 0 {
			spec.Extra = map[string]authorizationv1.ExtraValue{}
			for k, v := range at.User.Extra {
				spec.Extra[k] = v
			}
		}
	}
	key := fmt.Sprintf("%q", []any{spec.User, spec.UID, spec.Groups, spec.Extra, at.Verb, at.APIVersion, at.Resource, at.Subresource, at.Name})
	if v, ok := a.cache.get(key, clk.Now()); ok {
		res := v.(authzResult)
		return res.allowed, res.reason, nil
	}
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("nodeapi: subject access review: %w", err)
	}
	res := authzResult{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason}
	switch {
	case res.allowed && a.AllowedTTL > 0:
		a.cache.add(key, res, clk.Now().Add(a.AllowedTTL))
	case !res.allowed && a.DeniedTTL > 0:
		a.cache.add(key, res, clk.Now().Add(a.DeniedTTL))
	}
	return res.allowed, res.reason, nil
}
