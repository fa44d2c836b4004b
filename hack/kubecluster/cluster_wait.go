//go:build linux

// Waiting for the cluster's processes and nodes, and its clients.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// waitFor polls cond until it holds, the process exits, or ctx ends.
func waitFor(ctx context.Context, p *proc, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if !p.running() {
			return fmt.Errorf("exited: %v", p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// waitAll is waitFor while every component keeps running.
func (c *cluster) waitAll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		for _, p := range c.procs {
			if !p.running() {
				return fmt.Errorf("%s exited: %v (log: %s)", p.name, p.err, filepath.Join(c.o.state, "logs", p.name+".log"))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func (c *cluster) waitNodesReady(ctx context.Context, nodes []node, timeout time.Duration) error {
	cs, err := c.client("admin")
	if err != nil {
		return err
	}
	return c.waitAll(ctx, timeout, func() bool {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready := map[string]bool{}
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready[n.Name] = true
				}
			}
		}
		for _, n := range nodes {
			if !ready[n.name] {
				return false
			}
		}
		return true
	})
}

func (c *cluster) writeKubeconfig(path, user, token string) error {
	ca, err := os.ReadFile(c.pki.path("ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubecluster"] = &clientcmdapi.Cluster{Server: c.server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubecluster"] = &clientcmdapi.Context{Cluster: "kubecluster", AuthInfo: user}
	cfg.CurrentContext = "kubecluster"
	return clientcmd.WriteToFile(*cfg, path)
}

func (c *cluster) client(user string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.o.state, user+".kubeconfig"))
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}
