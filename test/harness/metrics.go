package harness

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ScrapeMetrics returns what the plain-HTTP metrics endpoint at addr serves (a process that does
// not answer within two seconds, stopped or gone, is an error).
func ScrapeMetrics(addr string) (string, error) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// SumSamples sums the samples of a metric family in a scrape, of those whose labels contain
// label (all when empty).
func SumSamples(body, family, label string) (float64, error) {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		name, labels, _ := strings.Cut(line, "{")
		if name != family && !strings.HasPrefix(line, family+" ") || !strings.Contains(labels, label) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
