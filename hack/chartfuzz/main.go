// Command chartfuzz (`make fuzz-chart CHART=...`) renders a chart with every hostile value its
// values.schema.json admits and reports what broke (hack/chartfuzz/chartfuzz): an object set that
// changed, an object outside the release namespace, a document that is not an object, a
// rendering that fails. It exits 1 when anything broke.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/example/myproxy-operator/hack/chartfuzz/chartfuzz"
)

func main() {
	chart := flag.String("chart", "", "the chart's directory")
	flag.Parse()
	if *chart == "" {
		fmt.Fprintln(os.Stderr, "usage: chartfuzz --chart DIR")
		os.Exit(2)
	}
	report, err := chartfuzz.Run(*chart, nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartfuzz:", err)
		os.Exit(2)
	}
	for _, f := range report.Findings {
		fmt.Println(f)
	}
	fmt.Printf("%s: %d value sets tried, %d admitted by the schema, %d broke an invariant\n",
		*chart, report.Tried, report.Admitted, len(report.Findings))
	if len(report.Findings) > 0 {
		os.Exit(1)
	}
}
