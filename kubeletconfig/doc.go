// Package kubeletconfig maps the kubelet's configuration, a
// KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) and the
// kubelet's usual flags, onto nodekit's Options, as the kubelet reads
// them: flags given on the command line over the file's fields, then the
// kubelet's v1beta1 defaults (its SetDefaults_KubeletConfiguration with
// the default feature gates, and evictionHard's Linux default). It sits
// above the agent, as a binary does: it builds nodekit.Options and is not
// a part the agent runs.
//
// # Usage
//
//	var fl kubeletconfig.Flags
//	fl.Register(flag.CommandLine, "/var/lib/nodekit")
//	flag.Parse()
//	s, err := kubeletconfig.Load(&fl) // reads --config
//	for _, f := range s.Unsupported {
//		log.Info("Ignoring a field nodekit does not support", "field", f)
//	}
//	opts := s.Options // add Runtime, Sources, KubeClient, NodeServer, Logger
//
// cmd/nodekit-agent is the binary built on it.
//
// # Fields
//
// Settings.Options carries the fields nodekit acts on: the pod and node
// settings (syncFrequency, maxPods, podPidsLimit, cpuCFSQuota and its
// period, cgroupRoot, registerWithTaints, node status and Lease frequencies), DNS
// (clusterDNS, clusterDomain, resolvConf), eviction (evictionHard, Soft,
// SoftGracePeriod, MinimumReclaim, PressureTransitionPeriod,
// MaxPodGracePeriod, mergeDefaultEvictionSettings,
// localStorageCapacityIsolation), image garbage collection, log rotation,
// reserved resources and enforceNodeAllocatable (pods or none), unsafe
// sysctls, the pull parallelism, the restart back-off's maximum and
// userNamespaces.idsPerPod. Settings.Server carries the node API's
// (address, port, the serving certificate or serverTLSBootstrap, the
// client CA, anonymous authentication); Settings.Config the rest the
// caller wires (staticPodPath, staticPodURL, containerRuntimeEndpoint,
// rotateCertificates, kubeAPIQPS, kubeAPIBurst, contentType, enableServer,
// logging.verbosity).
//
// Any other field is reported in Settings.Unsupported, once, by its path
// (cgroupDriver, featureGates[Name], memorySwap.swapBehavior, ...),
// unless the file leaves it unset (a zero value, as the kubelet's
// defaulting reads it) or sets it to the value nodekit behaves as
// (healthzPort: 10248, cgroupDriver: cgroupfs, authorization.mode:
// Webhook, ...). A field KubeletConfiguration does not have is reported
// too, "(unknown field)", and does not stop the agent, as the kubelet's
// lenient decoding.
//
// # Errors
//
// A value nodekit cannot use fails New with the field's path:
// "kubeletconfig: evictionHard[memory.available]: ...",
// "kubeletconfig: registerWithTaints[0]: ...". A file of another kind or
// version, or larger than MaxFileBytes, fails ReadFile.
//
// # Differences from the kubelet
//
// The types are nodekit's own, with v1beta1's field names and JSON form
// (a test checks them against k8s.io/kubelet's): the package
// k8s.io/kubelet/config/v1beta1 links k8s.io/component-base's feature
// gates and legacy metrics registry, process-wide state nodekit's
// packages do not depend on (TestDeps). featureGates are reported, never
// applied: nodekit has no gates; its switches are Options fields.
package kubeletconfig
