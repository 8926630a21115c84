// Command minimal-agent is a node agent built from nodekit's defaults: it
// runs the static pods of a manifest directory (and, optionally, of a URL)
// and prints each pod's phase changes.
//
//	go run ./examples/minimal-agent --manifests examples/manifests
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/file"
	"github.com/nodekit/nodekit/sources/http"
)

func main() {
	var (
		manifests = flag.String("manifests", "examples/manifests", "directory (or file) of static pod manifests")
		url       = flag.String("manifest-url", "", "URL of a Pod or PodList to run too")
		nodeName  = flag.String("node-name", "", "node name (defaults to the host name)")
		endpoint  = flag.String("runtime-endpoint", "", "CRI endpoint, e.g. unix:///run/containerd/containerd.sock (default: the in-memory runtime)")
		kubecfg   = flag.String("kubeconfig", "", "kubeconfig of a cluster to join as a node (default: standalone)")
		verbosity = flag.Int("v", 0, "log verbosity (0: state changes, 1: pod lifecycle, 4: every sync)")
	)
	flag.Parse()
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)}))
	if err := run(log, *manifests, *url, *nodeName, *endpoint, *kubecfg); err != nil {
		log.Error(err, "minimal-agent failed")
		os.Exit(1)
	}
}

func run(log logr.Logger, manifests, url, nodeName, endpoint, kubeconfig string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		nodeName = strings.ToLower(h)
	}

	fileSource, err := file.New(file.Options{Path: manifests, NodeName: nodeName, Logger: log})
	if err != nil {
		return err
	}
	srcs := []nodekit.NamedSource{{Name: sources.FileSource, Source: fileSource}}
	if url != "" {
		httpSource, err := http.New(http.Options{URL: url, NodeName: nodeName, Logger: log})
		if err != nil {
			return err
		}
		srcs = append(srcs, nodekit.NamedSource{Name: sources.HTTPSource, Source: httpSource})
	}

	var rt runtime.RuntimeService
	// PodLogsDir defaults to /var/log/pods, where a CRI runtime writes.
	var rtOpts runtime.ManagerOptions
	rootDir := "" // defaults to /var/lib/nodekit
	var cgroups cgroup.PodManagerOptions
	if endpoint != "" {
		c, err := cri.New(ctx, endpoint, cri.WithLogger(log))
		if err != nil {
			return err
		}
		defer c.Close()
		rt = c
	} else {
		// The in-memory runtime simulates each container's shell script
		// (sleep and exit), so the pipeline can be watched anywhere; it
		// writes no logs.
		m := runtimetest.New(runtimetest.Options{})
		defer m.Close()
		rt = m
		rtOpts.PodLogsDir = filepath.Join(os.TempDir(), "nodekit", "logs")
		rootDir = filepath.Join(os.TempDir(), "nodekit", "root")
		cgroups.Disabled = true // it runs no processes
	}

	var client kubernetes.Interface
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 50, 100 // the kubelet's
		if client, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}

	agent, err := nodekit.New(nodekit.Options{
		KubeClient:     client,
		NodeName:       nodeName,
		Sources:        srcs,
		Runtime:        rt,
		Logger:         log,
		RuntimeManager: rtOpts,
		RootDir:        rootDir,
		Cgroups:        cgroups,
		OnPodStatus:    phasePrinter(),
	})
	if err != nil {
		return err
	}
	return agent.Run(ctx)
}

// phasePrinter prints a line each time a pod's phase or a container's state
// changes.
func phasePrinter() func(*v1.Pod, v1.PodStatus) {
	var mu sync.Mutex
	last := map[string]string{}
	return func(pod *v1.Pod, s v1.PodStatus) {
		line := string(s.Phase)
		for _, c := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
			line += fmt.Sprintf(" %s=%s", c.Name, containerState(c))
		}
		if s.Reason != "" {
			line += " (" + s.Reason + ")"
		}
		key := pod.Namespace + "/" + pod.Name
		mu.Lock()
		defer mu.Unlock()
		if last[key] != line {
			last[key] = line
			fmt.Printf("%-32s %s\n", key, line)
		}
	}
}

func containerState(c v1.ContainerStatus) string {
	switch {
	case c.State.Running != nil:
		return fmt.Sprintf("running(restarts:%d)", c.RestartCount)
	case c.State.Terminated != nil:
		return fmt.Sprintf("exited:%d(restarts:%d)", c.State.Terminated.ExitCode, c.RestartCount)
	case c.State.Waiting != nil:
		return "waiting:" + c.State.Waiting.Reason
	}
	return "unknown"
}
