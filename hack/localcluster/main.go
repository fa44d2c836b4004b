// Command localcluster runs a local control plane (kube-apiserver and etcd,
// built by hack/build-control-plane.sh) with the Eraser CRDs installed, for
// the demo and for poking around. It writes an admin kubeconfig and runs until
// interrupted, then stops everything it started.
//
//	go run ./hack/localcluster -assets DIR -write-kubeconfig FILE
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	assets := flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory holding kube-apiserver and etcd")
	// controller-runtime already owns -kubeconfig (the one to read).
	kubeconfig := flag.String("write-kubeconfig", "", "where to write the admin kubeconfig")
	crds := flag.String("crds", filepath.Join("config", "crd", "bases"), "directory of CRDs to install")
	flag.Parse()
	if err := run(*assets, *kubeconfig, *crds); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(assets, kubeconfig, crds string) error {
	if assets == "" || kubeconfig == "" {
		return fmt.Errorf("-assets and -write-kubeconfig are required")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{crds},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()

	user, err := env.AddUser(envtest.User{Name: "eraser-demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	fmt.Printf("control plane ready at %s; kubeconfig %s\n", cfg.Host, kubeconfig)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	fmt.Println("stopping control plane")
	return nil
}
