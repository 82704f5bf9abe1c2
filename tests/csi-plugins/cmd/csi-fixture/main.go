// csi-fixture: the two gRPC services a CSI node plugin exposes to the kubelet, served from the
// real generated Go bindings (not our own idea of the protocol):
//
//   - `registrar`: the kubelet plugin-registration service, k8s.io/kubelet's
//     pkg/apis/pluginregistration/v1 (`pluginregistration.Registration`), on a socket as
//     node-driver-registrar serves it under <kubelet-root>/plugins_registry/. The real
//     csi-node-driver-registrar is not used because the Go module proxy refuses its module
//     (github.com/kubernetes-csi/node-driver-registrar: 403), as it does
//     csi-driver-host-path; csi-test v5's mock driver is a gomock mock with no server logic.
//     What this serves is what node-driver-registrar's registrationServer answers
//     (type CSIPlugin, the driver name, the kubelet-side endpoint, versions ["1.0.0"]).
//   - `driver`: the CSI Identity service, the CSI spec's generated bindings
//     (github.com/container-storage-interface/spec/lib/go/csi): GetPluginInfo,
//     GetPluginCapabilities, Probe (ready true, or false with --not-ready).
//
// Usage:
//
//	csi-fixture driver --socket PATH --name NAME [--not-ready]
//	csi-fixture registrar --socket PATH --name NAME --endpoint PATH
//
// Each prints "serving PATH" on stdout once it accepts connections and serves until killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type identity struct {
	csi.UnimplementedIdentityServer
	name  string
	ready bool
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: "v1.0.0-fixture"}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(i.ready)}, nil
}

type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registration) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	return &registerapi.RegistrationStatusResponse{}, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: csi-fixture driver|registrar --socket PATH --name NAME [--endpoint PATH] [--not-ready]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	socket := fs.String("socket", "", "unix socket to serve on")
	name := fs.String("name", "", "CSI driver name")
	endpoint := fs.String("endpoint", "", "registrar: the driver's endpoint GetInfo returns")
	notReady := fs.Bool("not-ready", false, "driver: Probe answers ready=false")
	_ = fs.Parse(os.Args[2:])
	if *socket == "" || *name == "" {
		fmt.Fprintln(os.Stderr, "csi-fixture: --socket and --name are needed")
		os.Exit(2)
	}
	_ = os.Remove(*socket)
	l, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "csi-fixture:", err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	switch mode {
	case "driver":
		csi.RegisterIdentityServer(s, &identity{name: *name, ready: !*notReady})
	case "registrar":
		registerapi.RegisterRegistrationServer(s, &registration{name: *name, endpoint: *endpoint})
	default:
		fmt.Fprintln(os.Stderr, "csi-fixture: unknown mode", mode)
		os.Exit(2)
	}
	fmt.Printf("serving %s\n", *socket)
	if err := s.Serve(l); err != nil {
		fmt.Fprintln(os.Stderr, "csi-fixture:", err)
		os.Exit(1)
	}
}
