package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

// trackedEntries scrapes myproxy_operator_tracked_entries{map} from plain-HTTP metrics.
func trackedEntries(t *testing.T, addr string) (map[string]float64, error) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, `myproxy_operator_tracked_entries{map="`) {
			continue
		}
		rest := strings.TrimPrefix(line, `myproxy_operator_tracked_entries{map="`)
		name, value, _ := strings.Cut(rest, `"} `)
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[name] = v
	}
	return out, sc.Err()
}

// countDeployed lists the MyProxies of a namespace and counts those Deployed.
func countDeployed(ctx context.Context, c client.Client, ns string) (all, deployed int, err error) {
	var list unstructured.UnstructuredList
	list.SetAPIVersion("gateway.example.com/v1alpha1")
	list.SetKind("MyProxyList")
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		if st, _, _ := harness.Condition(&list.Items[i], "Deployed"); st == "True" {
			deployed++
		}
	}
	return len(list.Items), deployed, nil
}

// SOAK_N MyProxies (200 in make test, 10000 in make chaos) are created and deleted in waves of
// at most 500; afterwards every in-memory map the operator keeps per custom resource (or per
// record written) holds what it held at start: nothing grows with the resources a long-lived
// operator has seen, only with those that exist.
func TestCreateDeleteSoakLeavesNoMemory(t *testing.T) {
	n := envInt("SOAK_N", 200)
	wave := min(n, 500)
	ctx := context.Background()
	c := harness.NewClient(t, env.Cfg)
	addr := harness.FreeAddr(t)
	ns := fixture.Namespace(t, c, nil)
	// Scoped to the soak's namespace: what other tests left in the shared control plane would
	// fill the maps while the operator reconciles it.
	harness.StartOperator(t, env.OperatorBin, env.Kubeconfig, []string{"--watches-file=" + harness.WriteWatches(t, harness.Watch{}),
		"--metrics-bind-address=" + addr}, "WATCH_NAMESPACE="+ns)
	// Every tenth MyProxy serves TLS: its rendering looks the Secret up, which the operator follows.
	pair := certs.Valid(t, "soak")
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "soak-tls", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": pair.Cert, "tls.key": pair.Key}}); err != nil {
		t.Fatal(err)
	}
	var baseline map[string]float64
	harness.Eventually(t, fixture.Timeout, "the tracked maps are exported", func(context.Context) (bool, string) {
		var err error
		baseline, err = trackedEntries(t, addr)
		return err == nil && len(baseline) > 0, fmt.Sprintf("no myproxy_operator_tracked_entries yet (%v)", err)
	})
	started := time.Now()
	peak := map[string]float64{}
	for done := 0; done < n; done += wave {
		size := min(wave, n-done)
		names := make(chan int)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range names {
					spec := map[string]any{}
					if i%10 == 0 {
						spec["tls"] = map[string]any{"secretName": "soak-tls"}
					}
					if err := c.Create(ctx, harness.MyProxy(ns, fmt.Sprintf("soak-%d", i), spec)); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		for i := range size {
			names <- done + i
		}
		close(names)
		wg.Wait()
		harness.Eventually(t, 15*time.Minute, fmt.Sprintf("wave of %d Deployed", size), func(ctx context.Context) (bool, string) {
			all, deployed, err := countDeployed(ctx, c, ns)
			return err == nil && deployed == size, fmt.Sprintf("%d of %d Deployed (%v)", deployed, all, err)
		})
		if during, err := trackedEntries(t, addr); err == nil {
			for name, v := range during {
				peak[name] = max(peak[name], v)
			}
		}
		mp := harness.MyProxy(ns, "", nil)
		if err := c.DeleteAllOf(ctx, mp, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 15*time.Minute, "wave deleted", func(ctx context.Context) (bool, string) {
			all, _, err := countDeployed(ctx, c, ns)
			return err == nil && all == 0, fmt.Sprintf("%d left (%v)", all, err)
		})
	}
	t.Logf("%d MyProxies created, deployed and deleted in %s; tracked entries with a wave deployed: %v",
		n, time.Since(started).Round(time.Second), peak)
	// The maps do hold the resources that exist: the check below is not of an idle gauge.
	for name, least := range map[string]float64{"status_generations": float64(wave) / 2, "release_states": float64(wave) / 2,
		"release_digests": float64(wave) / 2, "lookup_followers": 1} {
		if peak[name] < least {
			t.Errorf("%s held %g entries with %d MyProxies deployed", name, peak[name], wave)
		}
	}
	// Own record writes are kept a minute for their watch events; the rest goes with the resources.
	var now map[string]float64
	harness.Eventually(t, 3*time.Minute, "every map back to its size at start", func(context.Context) (bool, string) {
		var err error
		if now, err = trackedEntries(t, addr); err != nil {
			return false, err.Error()
		}
		for name, v := range now {
			if v > baseline[name] {
				return false, fmt.Sprintf("%s: %g entries, %g at start (all: %v)", name, v, baseline[name], now)
			}
		}
		return true, ""
	})
	t.Logf("tracked entries at start %v, after the soak %v", baseline, now)
	appendReport(t, "Create/delete soak", fmt.Sprintf("%d MyProxies created, deployed and deleted in waves of %d in %s.\n\n"+
		"| in-memory map | entries at start | most with a wave deployed | after the soak |\n|---|---|---|---|\n%s",
		n, wave, time.Since(started).Round(time.Second), trackedTable(baseline, peak, now)))
}

// trackedTable is one row per tracked map, in name order.
func trackedTable(start, peak, end map[string]float64) string {
	names := make([]string, 0, len(peak))
	for name := range peak {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "| %s | %g | %g | %g |\n", name, start[name], peak[name], end[name])
	}
	return b.String()
}
