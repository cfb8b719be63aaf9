package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// metricsFilterResult is one build of this operator serving /metrics under --metrics-secure:
// its binary size, what it answered to three scrapers, and its resident memory afterwards.
type metricsFilterResult struct {
	Filter      string  `json:"filter"`
	BinaryBytes int64   `json:"binaryBytes"`
	PeakRSSMiB  float64 `json:"peakRSSMiB"`
	// Answers is the status codes given to a scraper allowed to get /metrics, to one denied,
	// and to one without a token.
	Answers string `json:"answers"`
}

// metricsFilterBuilds are the two builds compared: the default, and controller-runtime's filter
// (go build -tags crmetricsfilter, bin/myproxy-operator-crmetricsfilter).
func metricsFilterBuilds(s settings) []struct{ filter, bin string } {
	return []struct{ filter, bin string }{
		{"own (internal/metricsauth)", s.ourBin},
		{"controller-runtime filters.WithAuthenticationAndAuthorization", s.ourBin + "-crmetricsfilter"},
	}
}

// benchMetricsFilter runs each build on the same 10 Deployed MyProxies with --metrics-secure,
// scrapes /metrics as an allowed ServiceAccount, a denied one and anonymously (so the filter's
// clients and caches exist), and reads the peak RSS after a settle.
func benchMetricsFilter(ctx context.Context, s settings, c *cluster) ([]metricsFilterResult, error) {
	const proxies, settle = 10, 20 * time.Second
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, t, err := freshTracked(ctx, c, "metrics filter")
	if err != nil {
		return nil, err
	}
	if err := parallel(ctx, s.workers, names("fleet", proxies), createProxy(e.dyn, fleetNamespace)); err != nil {
		return nil, err
	}
	allowed, err := scraperToken(ctx, e.cs, "scraper-allowed", true)
	if err != nil {
		return nil, err
	}
	denied, err := scraperToken(ctx, e.cs, "scraper-denied", false)
	if err != nil {
		return nil, err
	}
	var out []metricsFilterResult
	for i, b := range metricsFilterBuilds(s) {
		st, err := os.Stat(b.bin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (make bench builds it)", b.filter, err)
		}
		op := ours(s)
		op.bin = b.bin
		args := op.args
		op.args = func(m, h string) []string { return append(args(m, h), "--metrics-secure") }
		p, err := e.start(s, op, fmt.Sprintf("%s-metrics-filter-%d.log", op.user, i))
		if err != nil {
			return nil, err
		}
		if _, err := t.waitFor(ctx, "all Deployed", 5*time.Minute, allDeployed(proxies)); err != nil {
			p.stop()
			return nil, err
		}
		r := metricsFilterResult{Filter: b.filter, BinaryBytes: st.Size()}
		url := fmt.Sprintf("https://127.0.0.1:%d/metrics", s.portBase+90)
		var codes [3]int
		for j, token := range []string{allowed, denied, ""} {
			if codes[j], err = scrapeOnceServing(ctx, url, token); err != nil {
				p.stop()
				return nil, err
			}
		}
		r.Answers = fmt.Sprintf("%d / %d / %d", codes[0], codes[1], codes[2])
		time.Sleep(settle)
		u, err := p.usage()
		p.stop()
		if err != nil {
			return nil, err
		}
		r.PeakRSSMiB = float64(u.PeakBytes) / (1 << 20)
		progress("metrics filter %s: %d bytes, %.1f MiB, answers %s", b.filter, r.BinaryBytes, r.PeakRSSMiB, r.Answers)
		out = append(out, r)
	}
	return out, nil
}

// scraperToken makes a ServiceAccount in the default namespace, allowed or not to get /metrics,
// and returns a token for it.
func scraperToken(ctx context.Context, cs kubernetes.Interface, name string, allowed bool) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if allowed {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			return "", err
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return "", err
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// scrapeOnceServing scrapes url once its server listens: the secure metrics server starts
// after the health probes answer (it makes its certificate first).
func scrapeOnceServing(ctx context.Context, url, token string) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		code, err := scrape(ctx, url, token)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return code, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrape gets url with the bearer token (none if empty) and returns the status code. The
// metrics server's certificate is self-signed.
func scrape(ctx context.Context, url, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local, self-signed endpoint
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
