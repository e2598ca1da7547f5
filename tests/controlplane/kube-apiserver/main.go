// Command kube-apiserver is upstream's kube-apiserver built from the pinned
// k8s.io/kubernetes module, plus one test-harness behaviour: with
// CAPWASM_EXIT_ON_STDIN_EOF=1 it exits as soon as its stdin closes, so a test
// process that dies (however it dies) never leaves an API server behind.
package main

import (
	"os"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"

	"capwasm.dev/controlplane/parentwatch"
)

func main() {
	parentwatch.ExitOnStdinEOF()
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
