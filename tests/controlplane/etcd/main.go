// Command etcd is upstream's etcd server built from the pinned
// go.etcd.io/etcd/server/v3 module, plus one test-harness behaviour: with
// CAPWASM_EXIT_ON_STDIN_EOF=1 it exits as soon as its stdin closes.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"capwasm.dev/controlplane/parentwatch"
)

func main() {
	parentwatch.ExitOnStdinEOF()
	etcdmain.Main(os.Args)
}
