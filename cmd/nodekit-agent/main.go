// Command nodekit-agent is a node agent for operators, built from
// nodekit's SDK: it joins a cluster as a kubelet does, configured by a
// KubeletConfiguration file (--config) and the kubelet's usual flags
// (package kubeletconfig), with TLS bootstrap from a bootstrap token and
// client certificate rotation (package kubeclient/bootstrap). It runs
// the pods bound to its Node, and static pods from staticPodPath and
// staticPodURL.
//
// # Running it as a node of an existing cluster
//
//  1. Make a bootstrap token, as for kubeadm join (kubeadm token create),
//     or a Secret bootstrap-token-<id> in kube-system with
//     usage-bootstrap-authentication: "true" and auth-extra-groups:
//     system:bootstrappers:kubeadm:default-node-token. The cluster must
//     approve and sign node client certificates: kubeadm's RBAC bindings
//     (system:bootstrappers may create CertificateSigningRequests and
//     have theirs approved, system:nodes may renew their own) and
//     kube-controller-manager's csrapproving and csrsigning controllers,
//     as every kubeadm cluster has them.
//
//  2. Write a bootstrap kubeconfig with the API server's address, its CA
//     and the token, e.g. /etc/kubernetes/bootstrap-kubelet.conf.
//
//  3. Write a KubeletConfiguration, e.g. /var/lib/nodekit/config.yaml
//     (kubeadm's kubelet-config ConfigMap works: fields nodekit does not
//     support are listed once at start and otherwise ignored;
//     cgroupDriver must be cgroupfs for nodekit's own cgroups).
//
//  4. Run, as root, on a host with containerd:
//
//     nodekit-agent --config=/var/lib/nodekit/config.yaml \
//     --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
//     --kubeconfig=/etc/kubernetes/nodekit.conf \
//     --node-labels=node.example.com/pool=edge
//
// The agent requests its client certificate (CN system:node:<name>,
// group system:nodes), writes it to --cert-dir (default
// <root-dir>/pki) and a kubeconfig naming it to --kubeconfig, registers
// the Node with --node-labels and registerWithTaints, and renews the
// certificate before it expires (rotateCertificates: true). On later
// starts it reuses the kubeconfig. It works under the API server's Node
// authorizer and NodeRestriction admission: it reads only its own Node,
// Lease, pods and the objects they refer to.
//
// containerRuntimeEndpoint (or --container-runtime-endpoint) is a CRI
// socket, unix:///run/containerd/containerd.sock by default; process://DIR
// runs each container as a host process instead (package
// runtime/process, state in DIR).
//
// /configz on the node API (port 10250) serves the effective
// configuration, as the kubelet's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/kubeclient/bootstrap"
	"github.com/nodekit/nodekit/kubeletconfig"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/file"
	"github.com/nodekit/nodekit/sources/http"
)

func main() {
	process.RunMonitor() // this binary is also the monitor of process://'s containers
	var fl kubeletconfig.Flags
	fl.Register(flag.CommandLine, "/var/lib/nodekit")
	flag.Parse()
	s, err := kubeletconfig.Load(&fl)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodekit-agent:", err)
		os.Exit(1)
	}
	v := fl.Verbosity
	if v == 0 {
		v = int(s.Config.Logging.Verbosity)
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-v)}))
	for _, f := range s.Unsupported {
		log.Info("Ignoring a configuration field nodekit does not support", "field", f)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, s); err != nil {
		log.Error(err, "nodekit-agent failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, log logr.Logger, s *kubeletconfig.Settings) error {
	c, opts := s.Config, s.Options
	opts.Logger = log
	if opts.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		opts.NodeName = strings.ToLower(h)
	}
	if opts.RootDir == "" {
		opts.RootDir = "/var/lib/nodekit"
	}
	g, ctx := errgroup.WithContext(ctx)

	// The runtime.
	if dir, ok := strings.CutPrefix(c.ContainerRuntimeEndpoint, "process://"); ok {
		rt, err := process.New(process.Options{StateDir: dir, Logger: log})
		if err != nil {
			return err
		}
		defer rt.Close()
		opts.Runtime = rt
	} else {
		rt, err := cri.New(ctx, c.ContainerRuntimeEndpoint, cri.WithLogger(log))
		if err != nil {
			return err
		}
		defer rt.Close()
		opts.Runtime = rt
	}

	// Static pods.
	if c.StaticPodPath != "" {
		src, err := file.New(file.Options{Path: c.StaticPodPath, Period: c.FileCheckFrequency.Duration, Logger: log})
		if err != nil {
			return err
		}
		opts.Sources = append(opts.Sources, nodekit.NamedSource{Name: sources.FileSource, Source: src})
	}
	if c.StaticPodURL != "" {
		src, err := http.New(http.Options{URL: c.StaticPodURL, Header: c.StaticPodURLHeader, Period: c.HTTPCheckFrequency.Duration, Logger: log})
		if err != nil {
			return err
		}
		opts.Sources = append(opts.Sources, nodekit.NamedSource{Name: sources.HTTPSource, Source: src})
	}

	// The cluster: the kubeconfig, or TLS bootstrap.
	if s.Kubeconfig != "" {
		creds, err := bootstrap.New(bootstrap.Options{
			NodeName: opts.NodeName, Kubeconfig: s.Kubeconfig, BootstrapKubeconfig: s.BootstrapKubeconfig,
			CertDir: s.CertDir, Rotate: c.RotateCertificates, Logger: log,
		})
		if err != nil {
			return err
		}
		g.Go(func() error { return creds.Run(ctx) })
		log.Info("Waiting for the node's credentials", "kubeconfig", s.Kubeconfig, "bootstrapKubeconfig", s.BootstrapKubeconfig)
		cfg, err := creds.Wait(ctx)
		if err != nil {
			stopped := g.Wait()
			return errors.Join(err, stopped)
		}
		cfg.QPS, cfg.Burst, cfg.ContentType = float32(*c.KubeAPIQPS), int(c.KubeAPIBurst), c.ContentType
		if opts.KubeClient, err = kubeclient.NewForConfig(cfg); err != nil {
			return err
		}
		if *c.EnableServer {
			so := s.Server
			so.Configz = s.Configz
			if opts.NodeServer, err = nodeserver.New(so); err != nil {
				return err
			}
		}
	} else if s.BootstrapKubeconfig != "" {
		return errors.New("--bootstrap-kubeconfig needs --kubeconfig, where the node's credentials are written")
	}

	agent, err := nodekit.New(opts)
	if err != nil {
		return err
	}
	g.Go(func() error { return agent.Run(ctx) })
	return g.Wait()
}
