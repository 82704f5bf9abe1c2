// kube-apiserver, built from the pinned k8s.io/kubernetes module for the test suite's control plane.
// Nothing here changes the server: it is the upstream command, linked from the module proxy.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
