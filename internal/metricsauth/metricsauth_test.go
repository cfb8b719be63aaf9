package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// apiserver answers reviews: tokens map to users, and allowed lists who may get /metrics.
type apiserver struct {
	tokens        map[string]authenticationv1.UserInfo
	allowed       map[string]bool
	failing       bool
	tokenReviews  int
	accessReviews []authorizationv1.SubjectAccessReviewSpec
}

func (a *apiserver) guard(now func() time.Time) *Guard {
	g := &Guard{
		TokenReview: func(_ context.Context, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
			a.tokenReviews++
			if a.failing {
				return nil, errors.New("apiserver unreachable")
			}
			user, ok := a.tokens[r.Spec.Token]
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: ok, User: user}
			return r, nil
		},
		AccessReview: func(_ context.Context, r *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
			a.accessReviews = append(a.accessReviews, r.Spec)
			nr := r.Spec.NonResourceAttributes
			r.Status.Allowed = a.allowed[r.Spec.User] && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
			return r, nil
		},
	}
	g.users.now, g.decisions.now = now, now
	return g
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func serve(t *testing.T, g *Guard, authorization string) (int, string) {
	t.Helper()
	h, err := g.Filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("metrics"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func TestOnlyAuthenticatedAndAuthorisedCallersAreServed(t *testing.T) {
	scraper := authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", UID: "u1",
		Groups: []string{"system:serviceaccounts"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}}
	a := &apiserver{
		tokens:  map[string]authenticationv1.UserInfo{"good": scraper, "other": {Username: "nobody"}},
		allowed: map[string]bool{scraper.Username: true},
	}
	c := &clock{t: time.Unix(1000, 0)}
	g := a.guard(c.now)

	for _, tc := range []struct {
		authorization string
		code          int
		body          string
	}{
		{authorization: "", code: http.StatusUnauthorized, body: "Unauthorized"},
		{authorization: "Basic Z29vZA==", code: http.StatusUnauthorized, body: "Unauthorized"},
		{authorization: "Bearer ", code: http.StatusUnauthorized, body: "Unauthorized"},
		{authorization: "Bearer forged", code: http.StatusUnauthorized, body: "Unauthorized"},
		{authorization: "Bearer other", code: http.StatusForbidden, body: "Authorization denied for user nobody"},
		{authorization: "Bearer good", code: http.StatusOK, body: "metrics"},
		{authorization: "bearer  good ", code: http.StatusOK, body: "metrics"},
	} {
		if code, body := serve(t, g, tc.authorization); code != tc.code || body != tc.body {
			t.Errorf("Authorization %q: %d %q, want %d %q", tc.authorization, code, body, tc.code, tc.body)
		}
	}
	// The access review asks about the caller, with all it is, for the path and verb.
	last := a.accessReviews[len(a.accessReviews)-1]
	if last.User != scraper.Username || last.UID != "u1" || len(last.Groups) != 1 || last.Extra["k"][0] != "v" {
		t.Errorf("access review for %+v, want the scraper with its groups and extra", last)
	}
	if a.tokenReviews != 3 || len(a.accessReviews) != 2 {
		t.Errorf("%d token reviews and %d access reviews, want 3 and 2 (answers are reused)", a.tokenReviews, len(a.accessReviews))
	}

	// Answers expire: a token after a minute, an allow after five.
	c.t = c.t.Add(61 * time.Second)
	serve(t, g, "Bearer good")
	if a.tokenReviews != 4 || len(a.accessReviews) != 2 {
		t.Errorf("after 61 s: %d token reviews and %d access reviews, want 4 and 2", a.tokenReviews, len(a.accessReviews))
	}
	c.t = c.t.Add(5 * time.Minute)
	a.allowed = map[string]bool{} // its ClusterRoleBinding was removed
	if code, _ := serve(t, g, "Bearer good"); code != http.StatusForbidden {
		t.Errorf("after the allow expired and the binding went: %d, want 403", code)
	}
}

func TestAnUnreachableApiserverIsAnInternalError(t *testing.T) {
	a := &apiserver{failing: true}
	if code, body := serve(t, a.guard(time.Now), "Bearer good"); code != http.StatusInternalServerError || body != "Authentication failed" {
		t.Errorf("%d %q, want 500 Authentication failed", code, body)
	}
}

func TestTheCacheIsBounded(t *testing.T) {
	var a answers[bool]
	for i := range 3 * maxAnswers {
		a.put(strings.Repeat("k", i%50)+string(rune(i)), true, time.Hour)
	}
	if n := len(a.entries); n > maxAnswers {
		t.Errorf("%d answers kept, max %d", n, maxAnswers)
	}
}

// A decision is reused only for the very identity it was made for: two tokens of one user
// whose extra fields differ (scopes that an authorizer may read) are each reviewed, and the
// review carries the extra fields.
func TestADecisionCoversTheWholeIdentity(t *testing.T) {
	base := authenticationv1.UserInfo{Username: "scraper", UID: "1", Groups: []string{"g"}}
	scoped := base
	scoped.Extra = map[string]authenticationv1.ExtraValue{"scopes.authorization.openshift.io": {"user:info"}}
	api := &apiserver{
		tokens:  map[string]authenticationv1.UserInfo{"full": base, "scoped": scoped},
		allowed: map[string]bool{"scraper": true},
	}
	c := &clock{t: time.Unix(0, 0)}
	g := api.guard(c.now)
	for _, token := range []string{"full", "scoped", "full", "scoped"} {
		if code, _ := serve(t, g, "Bearer "+token); code != http.StatusOK {
			t.Fatalf("%s: status %d", token, code)
		}
	}
	if len(api.accessReviews) != 2 {
		t.Fatalf("%d access reviews, want 2: one per distinct identity, then cached", len(api.accessReviews))
	}
	if got := api.accessReviews[1].Extra["scopes.authorization.openshift.io"]; len(got) != 1 || got[0] != "user:info" {
		t.Errorf("the scoped identity's review carries extra %v", api.accessReviews[1].Extra)
	}
}
