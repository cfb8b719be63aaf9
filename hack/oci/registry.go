package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// registryCmd serves the registry protocol over TLS until SIGTERM or SIGINT. Blobs are kept in
// --dir; manifests and tags live in memory, so a restarted registry is empty.
func registryCmd(args []string) error {
	fs := flag.NewFlagSet("registry", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:5000", "address to listen on")
	cert := fs.String("tls-cert", "", "serving certificate (PEM)")
	key := fs.String("tls-key", "", "its private key (PEM)")
	dir := fs.String("dir", "", "directory for blobs")
	_ = fs.Parse(args)
	if *cert == "" || *key == "" || *dir == "" {
		return fmt.Errorf("registry: --tls-cert, --tls-key and --dir are required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	logger := log.New(os.Stderr, "registry: ", log.LstdFlags)
	srv := &http.Server{
		Addr:              *addr,
		Handler:           registry.New(registry.Logger(logger), registry.WithBlobHandler(registry.NewDiskBlobHandler(*dir))),
		ReadHeaderTimeout: 30 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Printf("serving https://%s", *addr)
	if err := srv.ListenAndServeTLS(*cert, *key); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
