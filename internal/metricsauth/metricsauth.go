// Package metricsauth guards the metrics endpoint: only callers whose bearer token the apiserver
// authenticates (a TokenReview) and who may get the path (a SubjectAccessReview, e.g. the
// metrics-reader ClusterRole's nonResourceURLs /metrics) are served.
//
// It behaves as controller-runtime's filters.WithAuthenticationAndAuthorization (the same
// status codes, cache lifetimes and review requests, decisions cached under the whole review),
// with client-go alone. That filter builds on k8s.io/apiserver's authentication and
// authorization stacks, which link CEL, gRPC and OpenTelemetry into the binary, and into the
// process's resident memory, since most of a Go binary's code and read-only data end up mapped
// in; docs/performance.md gives the measured difference.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long review answers are reused, as in controller-runtime's filter.
const (
	authenticatedTTL = time.Minute
	allowTTL         = 5 * time.Minute
	denyTTL          = 30 * time.Second
	reviewTimeout    = 10 * time.Second
)

// WithAuthenticationAndAuthorization is a metricsserver.Options.FilterProvider.
func WithAuthenticationAndAuthorization(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	g := &Guard{
		TokenReview: func(ctx context.Context, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
			return cs.AuthenticationV1().TokenReviews().Create(ctx, r, metav1.CreateOptions{})
		},
		AccessReview: func(ctx context.Context, r *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
			return cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		},
	}
	return g.Filter, nil
}

// Guard answers whether a request may be served, asking the apiserver through its two functions.
type Guard struct {
	TokenReview  func(context.Context, *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	AccessReview func(context.Context, *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)

	users     answers[authenticationv1.UserInfo] // by token digest
	decisions answers[bool]                      // by user, path and verb
}

// Filter implements metricsserver.Filter.
func (g *Guard) Filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, ok, err := g.authenticate(req)
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !ok {
			log.V(4).Info("Authentication failed")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, err := g.authorize(req, user)
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Authorization denied for user %s", user.Username)
			log.V(4).Info(msg)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

func (g *Guard) authenticate(req *http.Request) (authenticationv1.UserInfo, bool, error) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return authenticationv1.UserInfo{}, false, nil
	}
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(token))) // tokens are not kept in memory
	if user, ok := g.users.get(key); ok {
		return user, true, nil
	}
	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	review, err := g.TokenReview(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
	if err != nil {
		return authenticationv1.UserInfo{}, false, err
	}
	if !review.Status.Authenticated {
		return authenticationv1.UserInfo{}, false, nil // not kept: a flood of bad tokens must not grow the cache
	}
	g.users.put(key, review.Status.User, authenticatedTTL)
	return review.Status.User, true, nil
}

func (g *Guard) authorize(req *http.Request, user authenticationv1.UserInfo) (bool, error) {
	verb, path := strings.ToLower(req.Method), req.URL.Path
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	// The decision is cached under the whole review it answers, as controller-runtime's filter
	// keys on the whole request: an identity that differs in anything the authorizer may read
	// (its extra fields, such as scopes, included) is asked about on its own.
	key, err := reviewKey(spec)
	if err != nil {
		return false, err
	}
	if allowed, ok := g.decisions.get(key); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	review, err := g.AccessReview(ctx, &authorizationv1.SubjectAccessReview{Spec: spec})
	if err != nil {
		return false, err
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	g.decisions.put(key, allowed, ttl)
	return allowed, nil
}

// reviewKey is a digest of the whole review spec (JSON encodes map keys sorted, so equal specs
// have equal keys).
func reviewKey(spec authorizationv1.SubjectAccessReviewSpec) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(raw)), nil
}

// answers is a map of review answers that expire.
type answers[T any] struct {
	mu      sync.Mutex
	entries map[string]answer[T]
	now     func() time.Time // nil: time.Now
}

type answer[T any] struct {
	value   T
	expires time.Time
}

// maxAnswers bounds the cache; past it, expired answers are dropped, then all of them.
const maxAnswers = 1024

func (a *answers[T]) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

func (a *answers[T]) get(key string) (T, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[key]
	if !ok || !a.clock().Before(e.expires) {
		var zero T
		return zero, false
	}
	return e.value, true
}

func (a *answers[T]) put(key string, value T, ttl time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock()
	if a.entries == nil {
		a.entries = map[string]answer[T]{}
	}
	if len(a.entries) >= maxAnswers {
		for k, e := range a.entries {
			if !now.Before(e.expires) {
				delete(a.entries, k)
			}
		}
		if len(a.entries) >= maxAnswers {
			clear(a.entries)
		}
	}
	a.entries[key] = answer[T]{value: value, expires: now.Add(ttl)}
}
