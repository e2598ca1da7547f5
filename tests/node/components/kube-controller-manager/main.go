// Command kube-controller-manager is upstream's, built from the pinned
// k8s.io/kubernetes module, exiting when its stdin closes (see kubelet).
package main

import (
	"os"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"capwasm.dev/controlplane/parentwatch"
)

func main() {
	parentwatch.ExitOnStdinEOF()
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
