// Command myproxy-operator runs the Helm-based operator: it reads watches.yaml and installs,
// upgrades and uninstalls one Helm release of the mapped chart per custom resource.
// `myproxy-operator preview` tells, without writing, what a chart would do to every release.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/example/myproxy-operator/internal/operator"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/preview"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == preview.Name {
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := preview.Command(ctx, os.Args[2:], os.Stdout, os.Stderr)
		cancel()
		os.Exit(code)
	}
	var opts options.Options
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	log.Info("starting", "watchesFile", opts.WatchesFile, "namespaces", os.Getenv(options.WatchNamespaceEnv))
	// SIGTERM or SIGINT cancels the context: in-flight reconciles get GracefulShutdownTimeout to
	// finish and the leader Lease is released so another replica takes over at once.
	err := operator.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), opts, options.WatchNamespacesFromEnv())
	if err != nil {
		log.Error(err, "operator stopped with an error")
		os.Exit(1)
	}
}
