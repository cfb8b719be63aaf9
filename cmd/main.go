// Command myproxy-operator runs the Helm-based operator: it reads watches.yaml and installs,
// upgrades and uninstalls one Helm release of the mapped chart per custom resource.
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/example/myproxy-operator/internal/operator"
	"github.com/example/myproxy-operator/internal/options"
)

func main() {
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
	if err := operator.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), opts, options.WatchNamespacesFromEnv()); err != nil {
		log.Error(err, "operator stopped with an error")
		os.Exit(1)
	}
}
