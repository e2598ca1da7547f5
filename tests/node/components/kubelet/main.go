// Command kubelet is upstream's kubelet built from the pinned
// k8s.io/kubernetes module (the version of the test API server), plus one
// test-harness behaviour: with CAPWASM_EXIT_ON_STDIN_EOF=1 it exits as soon
// as its stdin closes, so a test process that dies never leaves it behind.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kubelet/app"

	"capwasm.dev/controlplane/parentwatch"
)

func main() {
	parentwatch.ExitOnStdinEOF()
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
