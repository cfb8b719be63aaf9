//go:build !crmetricsfilter

package operator

import "github.com/example/myproxy-operator/internal/metricsauth"

// metricsFilter guards /metrics under --metrics-secure: the operator's own TokenReview and
// SubjectAccessReview filter, which does not link k8s.io/apiserver. Building with
// `-tags crmetricsfilter` puts controller-runtime's filter in its place, so that `make bench`
// can compare the two.
var metricsFilter = metricsauth.WithAuthenticationAndAuthorization
