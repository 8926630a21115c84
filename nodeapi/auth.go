package nodeapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
)

// UserInfo is an authenticated user.
type UserInfo struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Authenticator authenticates a request. ok false with a nil error means
// the request carries no credentials it recognises.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (user *UserInfo, ok bool, err error)
}

// AuthenticatorFunc adapts a function to an Authenticator.
type AuthenticatorFunc func(r *http.Request) (*UserInfo, bool, error)

// AuthenticateRequest calls f.
func (f AuthenticatorFunc) AuthenticateRequest(r *http.Request) (*UserInfo, bool, error) { return f(r) }

// Attributes describe what a request does, as a SubjectAccessReview's
// resource attributes: always resource "nodes", API version "v1", the
// node's name, and a subresource chosen by the path.
type Attributes struct {
	User        *UserInfo
	Verb        string
	APIVersion  string
	Resource    string
	Subresource string
	Name        string
	Path        string
}

// Authorizer decides whether a user may do what the attributes say.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// AuthorizerFunc adapts a function to an Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (bool, string, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	return f(ctx, a)
}

var (
	_ Authenticator = AuthenticatorFunc(nil)
	_ Authorizer    = AuthorizerFunc(nil)
)

// Auth authenticates and authorizes requests as the kubelet's auth filter
// does: 401 "Unauthorized" for a request no authenticator accepts (or
// whose credentials fail), 403 naming the user, verb, resource and
// subresources for one no attribute set allows, 500 when the authorizer
// fails. NewDelegatingAuth builds the kubelet's (client certificates,
// TokenReview, SubjectAccessReview, cached).
type Auth struct {
	Authenticator Authenticator
	Authorizer    Authorizer
}

func (a *Auth) filter(w http.ResponseWriter, r *http.Request, nodeName string, log logr.Logger) bool {
	user, ok, err := a.Authenticator.AuthenticateRequest(r)
	if err != nil {
		log.V(1).Info("Unable to authenticate the request", "path", r.URL.Path, "err", err.Error())
	}
	if err != nil || !ok || user == nil {
		writeText(w, http.StatusUnauthorized, "Unauthorized")
		return false
	}
	attrs := RequestAttributes(user, r, nodeName)
	subresources := make([]string, 0, len(attrs))
	for _, at := range attrs {
		subresources = append(subresources, at.Subresource)
		allowed, _, err := a.Authorizer.Authorize(r.Context(), at)
		if err != nil {
			log.Error(err, "Authorization error", "user", user.Name, "verb", at.Verb, "resource", at.Resource, "subresource", at.Subresource)
			writeText(w, http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)", user.Name, at.Verb, at.Resource, at.Subresource))
			return false
		}
		if allowed {
			return true
		}
	}
	msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)", user.Name, attrs[0].Verb, attrs[0].Resource, subresources)
	log.V(2).Info("Forbidden", "user", user.Name, "verb", attrs[0].Verb, "subresources", subresources, "path", r.URL.Path)
	writeText(w, http.StatusForbidden, msg)
	return false
}

// RequestAttributes returns the attribute sets the kubelet checks for a
// request (pkg/kubelet/server/auth.go, with KubeletFineGrainedAuthz on, as
// it is by default): the request is allowed when any of them is. The verb
// comes from the method, the subresource from the path: /stats stats,
// /metrics metrics, /logs log, /checkpoint checkpoint, /statusz statusz,
// /flagz configz, anything else proxy; /pods and /runningpods/ also try
// pods, /healthz healthz and /configz configz, first.
func RequestAttributes(user *UserInfo, r *http.Request, nodeName string) []Attributes {
	verb := ""
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	p := r.URL.Path
	var subs []string
	switch {
	case isSubpath(p, "/pods"), isSubpath(p, "/runningpods"):
		subs = append(subs, "pods")
	case isSubpath(p, "/healthz"):
		subs = append(subs, "healthz")
	case isSubpath(p, "/configz"):
		subs = append(subs, "configz")
	}
	switch {
	case isSubpath(p, "/stats"):
		subs = append(subs, "stats")
	case isSubpath(p, "/metrics"):
		subs = append(subs, "metrics")
	case isSubpath(p, "/logs"):
		subs = append(subs, "log")
	case isSubpath(p, "/checkpoint"):
		subs = append(subs, "checkpoint")
	case isSubpath(p, "/statusz"):
		subs = append(subs, "statusz")
	case isSubpath(p, "/flagz"):
		subs = append(subs, "configz")
	default:
		subs = append(subs, "proxy")
	}
	attrs := make([]Attributes, 0, len(subs))
	for _, s := range subs {
		attrs = append(attrs, Attributes{
			User: user, Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: s, Name: nodeName, Path: p,
		})
	}
	return attrs
}

// isSubpath reports whether p is prefix or below it.
func isSubpath(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix) && p[len(prefix)] == '/'
}
