// Command hollow-nodes runs many nodekit agents in one process against one
// API server, each with a node name of its own and the in-memory runtime:
// "hollow" nodes for scale tests. Pods bound to them run in memory only,
// and their statuses, Nodes and Leases are written to the API server as a
// real agent would.
//
//	go run ./examples/hollow-nodes --kubeconfig ~/.kube/config --nodes 50
//
// The nodes write Warning events only (events.Warnings), so that a
// pod start costs the API server one write, the pod's status, rather than
// four; --events=all writes the kubelet's Normal events (Pulled, Created,
// Started, ...) too. It stops, leaving the Nodes registered, on SIGINT or
// SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"

	"golang.org/x/sync/errgroup"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/version"
)

func main() {
	var (
		kubecfg    = flag.String("kubeconfig", "", "kubeconfig of the cluster to join (required)")
		nodes      = flag.Int("nodes", 10, "number of hollow nodes")
		prefix     = flag.String("prefix", "hollow-node", "node names are <prefix>-<i>")
		verbosity  = flag.Int("v", 0, "log verbosity (0: state changes, 1: pod lifecycle, 4: every sync)")
		eventsFlag = flag.String("events", "warning", "events written to the API server: warning (Warning events only) or all")
		showVer    = flag.Bool("version", false, "print nodekit's version and exit")
	)
	flag.Parse()
	if *showVer {
		fmt.Println(version.Get())
		return
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)}))
	var filter func(eventtype, reason string) bool
	switch *eventsFlag {
	case "warning":
		filter = events.Warnings
	case "all":
	default:
		fmt.Fprintf(os.Stderr, "hollow-nodes: --events is warning or all, not %q\n", *eventsFlag)
		os.Exit(2)
	}
	if *kubecfg == "" || *nodes < 1 {
		fmt.Fprintln(os.Stderr, "hollow-nodes: --kubeconfig is required and --nodes must be at least 1")
		flag.Usage()
		os.Exit(2)
	}
	if err := run(log, *kubecfg, *nodes, *prefix, filter); err != nil {
		log.Error(err, "hollow-nodes failed")
		os.Exit(1)
	}
}

func run(log logr.Logger, kubeconfig string, n int, prefix string, eventFilter func(eventtype, reason string) bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// One client for every agent: one connection pool, and one rate
	// limiter sized as n kubelets' (50 QPS, burst 100 each).
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50*float32(n), 100*n
	cfg.ContentType = "application/vnd.kubernetes.protobuf" // as the kubelet's
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "hollow-nodes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	g, ctx := errgroup.WithContext(ctx)
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		rt := runtimetest.New(runtimetest.Options{}) // pulls any image, runs nothing
		defer rt.Close()
		agent, err := nodekit.New(nodekit.Options{
			NodeName:       name,
			KubeClient:     client,
			Runtime:        rt,
			RootDir:        filepath.Join(dir, name, "root"),
			RuntimeManager: podruntime.Options{PodLogsDir: filepath.Join(dir, name, "logs")},
			Cgroups:        cgroup.PodManagerOptions{Disabled: true}, // no processes to confine
			// A fixed capacity: the host's, n times over, would mislead the
			// scheduler.
			Node:        node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
			EventFilter: eventFilter,
			Logger:      log,
		})
		if err != nil {
			return err
		}
		g.Go(func() error { return agent.Run(ctx) })
	}
	log.Info("Hollow nodes running", "nodes", n, "first", prefix+"-0", "dir", dir)
	return g.Wait()
}
