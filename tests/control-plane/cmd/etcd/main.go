// etcd, built from the pinned go.etcd.io/etcd/server/v3 module: the control plane's datastore.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
