//go:build tools

// Package tools pins kwok, which makes fake Nodes Ready and Pods Running without a kubelet.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
