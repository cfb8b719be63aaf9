// Command etcd is etcd's own server entry point, built from the Go module proxy so the local
// control plane needs no release download.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
