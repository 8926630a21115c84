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
	"syscall"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/process"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/file"
	"github.com/nodekit/nodekit/sources/http"
	"github.com/nodekit/nodekit/version"
)

func main() {
	process.RunMonitor() // this binary is also the monitor of each container's process
	manifests := flag.String("manifests", "examples/manifests", "directory (or file) of static pod manifests")
	url := flag.String("manifest-url", "", "URL of a Pod or PodList to run too")
	host, _ := os.Hostname()
	nodeName := flag.String("node-name", strings.ToLower(host), "node name")
	endpoint := flag.String("runtime-endpoint", "", "CRI endpoint, e.g. unix:///run/containerd/containerd.sock (default: containers as host processes)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of a cluster to join as a node (default: standalone)")
	verbosity := flag.Int("v", 0, "log verbosity (0: state changes, 1: pod lifecycle, 4: every sync)")
	rotateCerts := flag.Bool("rotate-server-certificates", false, "with --kubeconfig: request the serving certificate from the cluster (a kubelet-serving CSR an approver must approve)")
	credConfig := flag.String("image-credential-provider-config", "", "credential-provider plugins' config (a CredentialProviderConfig file or directory), as the kubelet's")
	credBinDir := flag.String("image-credential-provider-bin-dir", "", "directory of the credential-provider plugins' executables")
	rootDir := flag.String("root-dir", "", "the agent's state directory: pods' volumes, checkpoints, image pull records (default: /var/lib/nodekit with --runtime-endpoint, a temporary directory without)")
	showVersion := flag.Bool("version", false, "print nodekit's version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		return
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, config{
		manifests: *manifests, url: *url, nodeName: *nodeName, endpoint: *endpoint, kubeconfig: *kubeconfig,
		rotateCerts: *rotateCerts, credConfig: *credConfig, credBinDir: *credBinDir, rootDir: *rootDir,
	}); err != nil {
		log.Error(err, "minimal-agent failed")
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	manifests, url, nodeName, endpoint, kubeconfig string
	rotateCerts                                    bool
	credConfig, credBinDir, rootDir                string
}

func run(ctx context.Context, log logr.Logger, c config) error {
	manifests, url, nodeName, endpoint, kubeconfig := c.manifests, c.url, c.nodeName, c.endpoint, c.kubeconfig
	opts := nodekit.Options{NodeName: nodeName, Logger: log, OnPodStatus: phasePrinter()}
	opts.ImageCredentialProviderConfig, opts.ImageCredentialProviderBinDir = c.credConfig, c.credBinDir
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("nodekit-%d", os.Geteuid())) // the process runtime's
	fileSource, err := file.New(file.Options{Path: manifests, Logger: log})
	if err != nil {
		return err
	}
	opts.Sources = []nodekit.NamedSource{{Name: sources.FileSource, Source: fileSource}}
	if url != "" {
		httpSource, err := http.New(http.Options{URL: url, Logger: log})
		if err != nil {
			return err
		}
		opts.Sources = append(opts.Sources, nodekit.NamedSource{Name: sources.HTTPSource, Source: httpSource})
	}
	if endpoint != "" {
		c, err := cri.New(ctx, endpoint, cri.WithLogger(log))
		if err != nil {
			return err
		}
		defer c.Close()
		opts.Runtime = c
	} else if rt, err := process.New(process.Options{StateDir: filepath.Join(dir, "process"), Logger: log}); err != nil {
		return err
	} else { // host processes that outlive the agent; pod cgroups only as root
		defer rt.Close()
		opts.Runtime, opts.RootDir, opts.Cgroups.Disabled = rt, filepath.Join(dir, "root"), os.Geteuid() != 0
		opts.RuntimeManager.PodLogsDir = filepath.Join(dir, "logs")
	}
	if c.rootDir != "" {
		opts.RootDir = c.rootDir
	}
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 50, 100                            // the kubelet's
		cfg.ContentType = "application/vnd.kubernetes.protobuf" // as the kubelet's
		// The kubelet's port 10250: kubectl logs, exec, port-forward, metrics.
		if opts.NodeServer, err = nodeserver.New(nodeserver.Options{ServerTLSBootstrap: c.rotateCerts}); err != nil {
			return err
		}
		if opts.KubeClient, err = kubeclient.NewForConfig(cfg); err != nil {
			return err
		}
	}
	agent, err := nodekit.New(opts)
	if err != nil {
		return err
	}
	return agent.Run(ctx)
}

// phasePrinter prints a line each time a pod's phase or a container's state changes.
func phasePrinter() func(*v1.Pod, v1.PodStatus) {
	last := map[string]string{} // the agent calls OnPodStatus one call at a time
	return func(pod *v1.Pod, s v1.PodStatus) {
		line := string(s.Phase)
		for _, c := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
			if st := c.State; st.Running != nil {
				line += fmt.Sprintf(" %s=running(restarts:%d,ready:%t)", c.Name, c.RestartCount, c.Ready)
			} else if st.Terminated != nil {
				line += fmt.Sprintf(" %s=exited:%d(restarts:%d)", c.Name, st.Terminated.ExitCode, c.RestartCount)
			} else if st.Waiting != nil {
				line += fmt.Sprintf(" %s=waiting:%s", c.Name, st.Waiting.Reason)
			}
		}
		if s.Reason != "" {
			line += " (" + s.Reason + ")"
		}
		if key := pod.Namespace + "/" + pod.Name; last[key] != line {
			last[key] = line
			fmt.Printf("%-32s %s\n", key, line)
		}
	}
}
