// Command hollow-nodes runs many nodekit agents in one process against one
// API server, each with a node name of its own and the in-memory runtime:
// "hollow" nodes for scale tests (package hollow, which a test suite calls
// itself). Pods bound to them run in memory only, and their statuses,
// Nodes and Leases are written to the API server as a real agent would.
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
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/hollow"
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
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if eventFilter == nil {
		eventFilter = func(string, string) bool { return true }
	}
	nodes, err := hollow.Start(ctx, cfg, n, hollow.Options{Prefix: prefix, EventFilter: eventFilter, Logger: log})
	if err != nil {
		return err
	}
	log.Info("Hollow nodes running and Ready", "nodes", n, "first", prefix+"-0")
	<-ctx.Done()
	return nodes.Stop()
}
