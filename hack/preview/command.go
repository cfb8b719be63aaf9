// Command preview tells, writing nothing, what a chart would do to the release of every custom
// resource of every watched kind: `make preview` runs it, with the operator's flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/controller"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/tenancy"
	"github.com/example/myproxy-operator/internal/watchesfile"
)

// Exit statuses of the command.
const (
	ExitNothingFails = 0 // every release would upgrade, or stay as it is
	ExitSomeFail     = 1 // some release's upgrade would fail (replaced or refused)
	ExitError        = 2 // the preview itself could not run
)

// Name is the command's.
const Name = "preview"

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// Command runs the preview with args (the operator's own flags, so that the preview renders as
// the deployed operator would, and its own), printing to out, and returns the exit status.
func Command(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o options.Options
	o.BindFlags(fs)
	chartDir := fs.String("chart-dir", "", "Preview this chart instead of the one watches.yaml names for the kind whose chart has the same name (a new chart before it ships).")
	format := fs.String("o", "text", "Output: text (one line per release and a summary) or json.")
	diff := fs.Bool("diff", false, "Show the field diff of every object that would change.")
	kubeconfig := fs.String("kubeconfig", "", "The cluster to preview against (default: $KUBECONFIG, ~/.kube/config, or in-cluster).")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "Usage: %s [flags] (make preview runs it)\n\n"+
			"Tells what the chart would do to the release of every custom resource of every watched kind, without\n"+
			"writing anything: unchanged, changed (which objects), replaced (an immutable field) or refused (with\n"+
			"the message). Exit status: %d if no upgrade would fail, %d if some would, %d if the preview could not run.\n\n",
			Name, ExitNothingFails, ExitSomeFail, ExitError)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitNothingFails
		}
		return ExitError
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(errOut, "preview: -o %s: want text or json\n", *format)
		return ExitError
	}
	rep, err := run(ctx, o, *kubeconfig, *chartDir, *diff)
	if err != nil {
		fmt.Fprintln(errOut, "preview:", err)
		return ExitError
	}
	if *format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return ExitError
		}
	} else {
		WriteText(out, rep)
	}
	if rep.Fails() {
		return ExitSomeFail
	}
	return ExitNothingFails
}

func run(ctx context.Context, o options.Options, kubeconfig, chartDir string, diff bool) (Report, error) {
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return Report{}, err
	}
	entries, err := watchesfile.Load(o.WatchesFile)
	if err != nil {
		return Report{}, fmt.Errorf("loading watches file %s: %w", o.WatchesFile, err)
	}
	if chartDir != "" {
		if entries, err = watchesfile.WithChart(entries, chartDir); err != nil {
			return Report{}, err
		}
	}
	c, err := client.New(cfg, client.Options{}) // Kubernetes' own types, the cluster's API discovered as needed
	if err != nil {
		return Report{}, err
	}
	scheme, mapper := c.Scheme(), c.RESTMapper()
	silent := &record.FakeRecorder{} // the checks record Events; a preview writes none
	var kinds []Kind
	records := helmconfig.NewRecords(nil) // a dry run writes no record
	for _, w := range entries {
		account := controller.ServiceAccountFor(w, o)
		configs, err := controller.HelmConfigs(cfg, mapper, w, o, records, nil)
		if err != nil {
			return Report{}, fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		declaration, err := chartapi.LoadCompiled(w.ChartPath)
		if err != nil {
			return Report{}, err
		}
		secrets, err := controller.CheckSecrets(cfg, c, account)
		if err != nil {
			return Report{}, err
		}
		actions := actionclient.New(actionclient.Options{Chart: w.Chart, Overrides: w.OverrideValues, Configs: configs,
			DryRunOption: w.DryRunOption, Recorder: silent,
			Translate: controller.CheckedTranslator(chartapi.Translator{Reader: secrets, Recorder: silent, Checks: declaration.Kind.Checks}.Translate,
				silent, o.MinReconcilePeriod)})
		kinds = append(kinds, Kind{GVK: w.GroupVersionKind, Actions: actions, Account: account, Decl: declaration})
	}
	namespaces := slices.Sorted(maps.Keys(options.WatchNamespacesFromEnv()))
	writers := map[string]client.Writer{} // by namespace/account: one connection per ServiceAccount
	writer := func(namespace, account string) (client.Writer, error) {
		if account == "" {
			return client.NewDryRunClient(c), nil
		}
		sa := namespace + "/" + account
		if w, ok := writers[sa]; ok {
			return w, nil
		}
		impersonated, err := client.New(tenancy.As(cfg, namespace, account), client.Options{Scheme: scheme, Mapper: mapper})
		if err != nil {
			return nil, fmt.Errorf("acting as ServiceAccount %s: %w", sa, err)
		}
		writers[sa] = client.NewDryRunClient(impersonated)
		return writers[sa], nil
	}
	return Previewer{Reader: c, Writer: writer, Mapper: mapper, Namespaces: namespaces, Diff: diff}.Run(ctx, kinds)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

// WriteText writes one line per release, the objects that would change under it, and a summary.
func WriteText(w io.Writer, rep Report) {
	for _, rel := range rep.Releases {
		line := fmt.Sprintf("%s %s/%s: %s", shortKind(rel.Kind), rel.Namespace, rel.Name, rel.Outcome)
		if rel.Message != "" {
			line += ": " + rel.Message
		}
		fmt.Fprintln(w, line)
		for _, o := range rel.Objects {
			ref := shortKind(o.Kind) + " " + o.Name
			if o.Namespace != "" && o.Namespace != rel.Namespace {
				ref = shortKind(o.Kind) + " " + o.Namespace + "/" + o.Name
			}
			fmt.Fprintf(w, "  %s %s", o.Change, ref)
			if o.Refused != "" {
				fmt.Fprintf(w, ": refused: %s", o.Refused)
			}
			fmt.Fprintln(w)
			if o.Diff != "" {
				for _, l := range strings.Split(strings.TrimRight(o.Diff, "\n"), "\n") {
					fmt.Fprintln(w, "    "+l)
				}
			}
		}
	}
	fmt.Fprintf(w, "%d releases: %d unchanged, %d changed, %d replaced, %d refused\n", len(rep.Releases),
		rep.Summary[Unchanged], rep.Summary[Changed], rep.Summary[Replaced], rep.Summary[Refused])
}

// shortKind is the Kind of a "group/version, Kind" reference.
func shortKind(ref string) string { return ref[strings.LastIndex(ref, " ")+1:] }
