// Command oci builds, pushes and reads OCI images without a container engine, and serves a
// registry for the local cluster:
//
//	oci build --file Dockerfile --context DIR [--build-arg K=V]... --out LAYOUT
//	    runs the Dockerfile as a container engine would (FROM scratch, and golang stages whose
//	    go commands run with the pinned toolchain), writes the image to an OCI layout and prints
//	    its digest; the same inputs give the same digest (SOURCE_DATE_EPOCH, else 0, dates it)
//	oci push LAYOUT REF                prints REF's repository @ the pushed digest
//	oci inspect LAYOUT|REF             the digest, the config and each layer's files, as JSON
//	oci export LAYOUT|REF DIR          the image's filesystem, layers applied in order
//	oci registry --addr --tls-cert --tls-key --dir
//
// A registry's certificate is checked against the system's roots and, when REGISTRY_CA names a
// file, the certificates in it (the local cluster's CA).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = buildCmd(args)
	case "push":
		err = pushCmd(args)
	case "inspect":
		err = inspectCmd(args)
	case "export":
		err = exportCmd(args)
	case "registry":
		err = registryCmd(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oci:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: oci build|push|inspect|export|registry ... (see the package comment)")
	os.Exit(2)
}

type repeated map[string]string

func (r repeated) String() string { return fmt.Sprint(map[string]string(r)) }

func (r repeated) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("%q is not NAME=value", kv)
	}
	r[k] = v
	return nil
}

func buildCmd(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	file := fs.String("file", "Dockerfile", "the Dockerfile")
	context := fs.String("context", ".", "the build context")
	out := fs.String("out", "", "the OCI layout directory to write (replaced)")
	platform := fs.String("platform", "linux/amd64", "os/arch[/variant] of the image")
	buildArgs := repeated{}
	fs.Var(buildArgs, "build-arg", "NAME=value for an ARG of the Dockerfile (repeatable)")
	_ = fs.Parse(args)
	if *out == "" || fs.NArg() != 0 {
		return fmt.Errorf("build: --out is required, and takes no arguments")
	}
	p, err := v1.ParsePlatform(*platform)
	if err != nil {
		return err
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	version, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("go env GOVERSION: %w", err)
	}
	img, err := build(*file, buildOptions{context: *context, buildArgs: buildArgs, platform: *p, created: created,
		goVersion: strings.TrimSpace(string(version))})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	l, err := layout.Write(*out, empty.Index)
	if err != nil {
		return err
	}
	if err := l.AppendImage(img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Println(digest)
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH (the reproducible-builds convention), else the epoch.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func pushCmd(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: oci push LAYOUT REF")
	}
	ref, err := push(args[0], args[1])
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

func inspectCmd(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: oci inspect LAYOUT|REF")
	}
	img, err := open(args[0])
	if err != nil {
		return err
	}
	report, err := inspect(img)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

func exportCmd(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: oci export LAYOUT|REF DIR")
	}
	img, err := open(args[0])
	if err != nil {
		return err
	}
	return export(img, args[1])
}
