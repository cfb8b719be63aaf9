//go:build crmetricsfilter

package operator

import "sigs.k8s.io/controller-runtime/pkg/metrics/filters"

// metricsFilter is controller-runtime's filter in this build (see metricsfilter.go).
var metricsFilter = filters.WithAuthenticationAndAuthorization
