// Package kubeclient is the Kubernetes API client of a nodekit agent: the
// API group versions and resources the agent calls, and on each resource
// only the methods it calls, with client-go's signatures.
//
// # Why not client-go's clientset
//
// client-go's kubernetes.Interface covers every built-in API group. Its
// packages (and client-go's informers, its event sink, component-helpers'
// lease controller and client-go's certificate manager, which all import
// them) register the 56 group versions of k8s.io/api in client-go's
// process-wide scheme at init. That init alone costs a program about
// 10 MiB of resident memory before main runs, a third of an idle agent's.
// Clientset speaks six group versions (core/v1, node.k8s.io/v1,
// coordination.k8s.io/v1, certificates.k8s.io/v1,
// authentication.k8s.io/v1, authorization.k8s.io/v1) over a scheme of its
// own, built by NewForConfig, on client-go's REST client and generic typed
// clients (k8s.io/client-go/rest, k8s.io/client-go/gentype): the requests
// it sends are those of client-go's typed clients.
//
// # Usage
//
//	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
//	...
//	cfg.ContentType = "application/vnd.kubernetes.protobuf" // as the kubelet
//	client, err := kubeclient.NewForConfig(cfg)
//	...
//	agent, err := nodekit.New(nodekit.Options{KubeClient: client, ...})
//
// A program that already has a client-go clientset (or a test with
// client-go's kubernetes/fake) gives it to the agent through
// clientset.From (package kubeclient/clientset), at the memory cost above:
//
//	agent, err := nodekit.New(nodekit.Options{KubeClient: clientset.From(cs), ...})
//
// Each per-resource interface holds only what nodekit calls, so a
// client-go typed client (corev1client.PodInterface, ...) satisfies it, as
// does a test's own small fake. The agent's informers list by streaming
// (client-go's WatchList) only over a Clientset or a client that says it
// can (ListWatcher), so a small fake's Watch need not send bookmarks.
//
// # Concurrency
//
// A Clientset is safe for concurrent use and holds no goroutine. Its
// requests share one HTTP client and, when the config sets a RateLimiter
// or QPS, one rate limiter, as client-go's clientset's do.
package kubeclient
