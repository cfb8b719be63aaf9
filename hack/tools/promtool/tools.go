//go:build tools

// Package tools pins promtool, built into bin/ to check the alerting rules in config/prometheus.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
