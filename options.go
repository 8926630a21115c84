package nodekit

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/env"
	"github.com/nodekit/nodekit/internal/runtimeclass"
	"github.com/nodekit/nodekit/internal/upkeep"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeserver/hook"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/apiserver"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/userns"
	"github.com/nodekit/nodekit/volume"
)

// NamedSource is a pod source and the name the agent knows it by. The name
// goes into each pod's kubernetes.io/config.source annotation; every name
// but sources.APIServerSource ("api") makes its pods static pods.
type NamedSource struct {
	Name   string
	Source sources.Source
}

// Options configure an Agent. The zero value of every field but NodeName,
// Sources and Runtime is a usable default.
type Options struct {
	// The node and the parts plugged in: checked by New with a clear
	// error, each part defaulting to nodekit's own.

	// NodeName is the name of the node the agent runs. Defaults to the
	// host name, lower-cased.
	NodeName string
	// RootDir is the agent's directory: pod directories and their volumes
	// live under <RootDir>/pods. Two agents in one process need two.
	// Defaults to /var/lib/nodekit.
	RootDir string
	// Logger receives the agent's logs. Defaults to discarding them.
	Logger logr.Logger
	// Sources deliver the pods to run. At least one is required unless
	// KubeClient is set, which adds the API server's pods as the source
	// named "api".
	Sources []NamedSource
	// Runtime runs the sandboxes and containers. Required.
	Runtime runtime.RuntimeService
	// Images pulls and inspects images. Defaults to Runtime when it also
	// implements runtime.ImageService.
	Images runtime.ImageService
	// KubeClient joins the agent to a cluster: it runs the pods bound to
	// NodeName (source "api"), registers the Node, reports its status and
	// renews its Lease. Make it with kubeclient.NewForConfig, or wrap a
	// client-go clientset (real, or kubernetes/fake in tests) with
	// clientset.From (package kubeclient/clientset), which links client-go's
	// scheme of every API group (about 10 MiB more resident memory).
	// Defaults to nil: a standalone agent.
	KubeClient kubeclient.Interface
	// NodeServer serves the node's HTTP API, the kubelet's port 10250
	// (kubectl logs, exec, attach, port-forward; stats and metrics): make
	// it with package nodeserver. Used only with KubeClient (nothing could
	// authorize a request to a standalone agent). Defaults to nil: no node
	// API, and none of its code linked. See package nodeserver/hook.
	NodeServer hook.Server
	// PLEG builds the pod lifecycle event generator, which tells the sync
	// loop which pods changed and keeps cache current with their runtime
	// status, read through statuses (the agent's runtime manager). It is
	// called once, by New, with the agent's logger. Defaults to pleg.NewAuto
	// with its defaults: when the runtime streams container events (CRI
	// GetContainerEvents: containerd 2.x and the in-memory runtime), the
	// agent follows the stream with a relist every 5m as a safety net, and
	// falls back to relisting every 1s while the stream is unavailable
	// (containerd 1.6 answers Unimplemented); other runtimes are relisted
	// every 1s. A PLEG that wraps another passes on its StreamsStatuses
	// method, if any (pleg.Evented's): the pod workers then take the
	// statuses the events bring after a start rather than reading the pod
	// (PodSyncerConfig.StatusEvents). A relisting PLEG, as the kubelet's
	// default:
	//
	//	PLEG: func(rt runtime.RuntimeService, st pleg.StatusGetter, c pleg.Cache, log logr.Logger) (pleg.EventGenerator, error) {
	//		return pleg.NewGeneric(rt, st, c, pleg.GenericOptions{Logger: log})
	//	},
	PLEG func(rt runtime.RuntimeService, statuses pleg.StatusGetter, cache pleg.Cache, log logr.Logger) (pleg.EventGenerator, error)
	// Objects gets the ConfigMaps and Secrets the pods refer to, for the
	// containers' environment, the configMap and secret volumes and the
	// imagePullSecrets (one source for all). Defaults, with KubeClient, to the API server's
	// through an objects.Cache (read again after Volumes.RefreshPeriod, 1m
	// by default, and when a new pod refers to them); without, to none.
	Objects objects.Getter
	// RuntimeClasses resolve a pod's spec.runtimeClassName: admission
	// rejects a pod whose class does not exist (reason RuntimeClass), and
	// its sandbox runs with the class's handler. Defaults, with
	// KubeClient, to an informer on the API server's RuntimeClasses, run
	// with the agent; without, to none: runtimeClassName is ignored, as by
	// a kubelet without an API client.
	RuntimeClasses RuntimeClassGetter
	// Services lists the Services whose variables containers get (the
	// service links). Defaults, with KubeClient, to an informer on the API
	// server's Services, run with the agent; set it to share one informer
	// between the agents of a process.
	Services env.Services
	// Events receives the pod lifecycle events. Defaults to the API
	// server's events (through client-go's broadcaster) with KubeClient,
	// and to none without.
	Events runtime.EventRecorder
	// Periodic, when set, runs the parts' periodic work (the package doc
	// of periodic lists it) as tasks of the Driver, which the agents of one
	// process can share (hollow nodes do): an idle agent then holds no
	// goroutine for it. The caller runs the Driver. Defaults to nil.
	Periodic *periodic.Driver
	// Admit holds extra admission checks, run in order after the
	// kubelet's (package admission: sysctls, OS, pod count, resources,
	// node affinity and name, host ports, taints, AppArmor, RuntimeClass);
	// the first
	// rejection wins.
	Admit []admission.Handler
	// WrapHandler, when set, wraps the default sync handler (a
	// *synchandler.Handler, wrapped by the allocation manager's triggers):
	// use it to observe or change how the loop's work is handled. The
	// pods it is given are shared with the agent's parts and with other
	// pods (see package sources): DeepCopy a pod before changing it. A
	// wrapper that drops a pod's addition leaves it unknown: the default
	// handler takes the pod's next update as an addition, through
	// admission; to keep a pod out for good, drop its updates too, or
	// refuse it with an Admit handler, whose rejections stick.
	WrapHandler func(syncloop.SyncHandler) syncloop.SyncHandler
	// WrapPodSyncer, when set, wraps or replaces the per-pod sync the pod
	// workers call (a *podsync.Syncer: the kubelet's SyncPod,
	// SyncTerminatingPod, SyncTerminatedPod). The pods and statuses
	// its calls are given are shared, as WrapHandler's: treat them as
	// read-only.
	WrapPodSyncer func(*podsync.Syncer) podworker.SyncFuncs
	// Extra channels the sync loop also selects over; each value received
	// names pods to sync.
	Extra []syncloop.Channel
	// OnPodStatus, when set, is called after each change of a pod's status
	// (phase, conditions, containers), one call at a time. It must not
	// block. The pod and the status are shared with the agent (the
	// status's condition list with other pods' statuses): treat them as
	// read-only.
	OnPodStatus func(pod *v1.Pod, status v1.PodStatus)

	// Tuning: the settings of the default parts, each defaulting to the
	// kubelet's, checked by New (and by the part's constructor).

	// Node describes the node: what it offers pods (MaxPods, 110 by
	// default; Capacity, the machine's cpu and memory by default), its
	// labels, taints and address; and, with KubeClient, configures its
	// registration, status and Lease (status every 10s, reported at least
	// every 5m, Lease of 40s renewed every 10s; Health, RuntimeVersion and
	// RuntimeHandlers default to the runtime's). Without KubeClient, its
	// Labels, Taints, MaxPods and Capacity make the Node that admission
	// checks pods against, and its InternalIP is the host IP of the pods.
	Node node.Options
	// APISource configures the API-server pod source, used only with
	// KubeClient.
	APISource apiserver.Options
	// AllowedUnsafeSysctls are the sysctls pods may set beyond the safe
	// ones, as the kubelet's allowedUnsafeSysctls ("kernel.msg*",
	// "net.core.somaxconn"); others are rejected with reason
	// SysctlForbidden. Defaults to none.
	AllowedUnsafeSysctls []string
	// SyncPeriod is the sync loop's tick. Defaults to 1s.
	SyncPeriod time.Duration
	// HousekeepingPeriod is the period of clean-ups (pods gone from every
	// source, orphaned containers). Defaults to 2s.
	HousekeepingPeriod time.Duration
	// ResyncInterval is how often a pod that is in its desired state is
	// synced again (with ±50% jitter). Defaults to 1m.
	ResyncInterval time.Duration
	// ErrorBackOff is the delay before a pod whose sync failed is synced
	// again (with ±50% jitter). Defaults to 10s.
	ErrorBackOff time.Duration
	// StatusMaxHold bounds how long a pod's sync keeps the statuses it
	// sets unwritten, so that they go out to the API server as one write,
	// its last (status.Options.MaxHold): a sync that takes longer (an image
	// pull) has the status it began with (Pending, ContainerCreating)
	// written then, as the kubelet's first status pass would. Defaults to
	// 2s. Hollow nodes, whose in-memory runtime pulls nothing and whose
	// syncs wait only for the CPU, hold longer.
	StatusMaxHold time.Duration
	// RuntimeStatusPeriod is how often the runtime's health (CRI Status)
	// is checked; while it is unhealthy the sync loop backs off. Defaults
	// to 5s.
	RuntimeStatusPeriod time.Duration
	// Volumes configures the volume manager (reconcile on changes, wait
	// at most 2m3s for a pod's volumes, refresh configMap, secret,
	// downwardAPI and projected volumes every 1m) and the host paths pods
	// may mount (AllowedHostPaths; nil allows all, as the kubelet). Its
	// Plugins default to hostPath, emptyDir and downwardAPI, plus
	// configMap, secret and projected (service-account tokens included)
	// with KubeClient.
	Volumes volume.Options
	// Cgroups configures the pod cgroups (cgroupfs, v1 or v2): a node root
	// (default "kubepods"), the burstable and besteffort QoS cgroups, one
	// cgroup per pod passed to the runtime as its sandbox's cgroup parent.
	// Set Cgroups.Disabled for an agent on a host it does not own, or whose
	// runtime runs no processes. Two agents on one host need two roots.
	// Its CPUCFSQuotaPeriod is also the containers' (each sync gives it to
	// the runtime manager).
	Cgroups cgroup.PodManagerOptions
	// NodeResources configures what keeps the node alive: system- and
	// kube-reserved resources, node-pressure eviction (package eviction)
	// and the garbage collection of dead containers, old sandboxes, the
	// logs of deleted pods and unused images (package gc), with the
	// kubelet's defaults.
	NodeResources NodeResourcesOptions
	// Probes configures the liveness, readiness and startup probes. Its
	// Runtime (for exec probes) defaults to Runtime.
	Probes probe.Options
	// UserNamespaces configures the user namespaces of hostUsers: false
	// pods (on by default, as the kubelet's; see UserNamespacesOptions).
	UserNamespaces UserNamespacesOptions
	// RuntimeManager configures the pod-level runtime manager (container
	// restart back-off 10s doubling to 300s, log directory, ...).
	RuntimeManager podruntime.Options
	// ImageCredentialProviderConfig and ImageCredentialProviderBinDir
	// run the kubelet's credential-provider plugins for image pulls (its
	// --image-credential-provider-config, a file or a directory of
	// them, and --image-credential-provider-bin-dir); both or neither. A
	// config that does not validate fails New. The node's docker config
	// files (credentials.NodeFiles, RootDir first) are read in any case,
	// as the kubelet reads them.
	ImageCredentialProviderConfig string
	ImageCredentialProviderBinDir string
	// EventFilter, when set, keeps the events for which it returns true
	// and drops the others, whichever the recorder. events.Warnings keeps
	// the Warning events only: with it a pod start writes only the pod's
	// status to the API server, not the Normal Pulled, Created and Started
	// events (three more writes), which suits nodes at scale.
	EventFilter func(eventtype, reason string) bool
}

// setDefaults checks o, group by group, and applies the defaults.
func (o *Options) setDefaults() error {
	if err := o.checkParts(); err != nil {
		return err
	}
	return o.checkTuning()
}

// checkParts checks the node and the parts plugged in.
func (o *Options) checkParts() error {
	if o.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("nodekit: NodeName not set and the host name is unknown: %w", err)
		}
		o.NodeName = strings.ToLower(h)
	}
	if len(o.Sources) == 0 && o.KubeClient == nil {
		return errors.New("nodekit: Options.Sources is empty and there is no KubeClient; at least one pod source is required")
	}
	seen := map[string]bool{}
	for i, s := range o.Sources {
		if s.Name == "" || s.Source == nil {
			return fmt.Errorf("nodekit: Options.Sources[%d] needs a name and a source", i)
		}
		if seen[s.Name] {
			return fmt.Errorf("nodekit: two sources named %q", s.Name)
		}
		if s.Name == sources.APIServerSource && o.KubeClient != nil {
			return fmt.Errorf("nodekit: the source name %q is the API server's, which KubeClient adds", s.Name)
		}
		seen[s.Name] = true
	}
	if o.Runtime == nil {
		return errors.New("nodekit: Options.Runtime is required")
	}
	if o.Images == nil {
		is, ok := o.Runtime.(runtime.ImageService)
		if !ok {
			return errors.New("nodekit: Options.Images is required when Runtime is not also an ImageService")
		}
		o.Images = is
	}
	if o.RootDir == "" {
		o.RootDir = volume.DefaultRootDir
	}
	return nil
}

// checkTuning checks the settings of the default parts the agent reads
// itself; each part's constructor checks the rest.
func (o *Options) checkTuning() error {
	if o.Node.MaxPods == 0 {
		o.Node.MaxPods = node.DefaultMaxPods
	}
	if o.Node.MaxPods < 0 {
		return fmt.Errorf("nodekit: Node.MaxPods %d is negative", o.Node.MaxPods)
	}
	defaultDuration(&o.SyncPeriod, time.Second)
	defaultDuration(&o.HousekeepingPeriod, 2*time.Second)
	defaultDuration(&o.ResyncInterval, time.Minute)
	defaultDuration(&o.ErrorBackOff, 10*time.Second)
	defaultDuration(&o.RuntimeStatusPeriod, 5*time.Second)
	defaultDuration(&o.StatusMaxHold, status.DefaultMaxHold)
	for _, d := range []time.Duration{o.SyncPeriod, o.HousekeepingPeriod, o.ResyncInterval, o.ErrorBackOff, o.RuntimeStatusPeriod, o.StatusMaxHold} {
		if d < 0 {
			return fmt.Errorf("nodekit: negative period %s", d)
		}
	}
	return nil
}

func defaultDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// UserNamespacesOptions configure the user namespaces of pods with
// hostUsers: false (package userns), on by default as in the kubelet
// (UserNamespacesSupport).
type UserNamespacesOptions struct {
	// Disabled turns user namespaces off: every sandbox gets the
	// runtime's default and a hostUsers: false pod fails with
	// podruntime.ErrUserNamespaces. Defaults to false.
	Disabled bool
	// IDsPerPod is how many user and group IDs each pod gets, a multiple
	// of 65536. Defaults to 65536 (the kubelet's
	// userNamespaces.idsPerPod).
	IDsPerPod uint32
	// Range is the range of host IDs given to pods. Defaults to nil: the
	// "kubelet" user's subordinate IDs (getsubids), else every ID from
	// IDsPerPod up, as the kubelet.
	Range *userns.Range
}

// RuntimeClassGetter returns a RuntimeClass by name, or an error that
// matches apierrors.IsNotFound for a class that does not exist. A
// client-go RuntimeClassLister (k8s.io/client-go/listers/node/v1) is one.
type RuntimeClassGetter = runtimeclass.Getter

// RuntimeClassGetterFunc is a RuntimeClassGetter made of a function.
type RuntimeClassGetterFunc = runtimeclass.GetterFunc

// The options of what keeps the node alive (Options.NodeResources): what
// it holds back from pods, node-pressure eviction (package eviction),
// garbage collection (package gc) and log rotation (package logrotate).
// The part that runs them is the agent's (internal/upkeep); to replace
// one, disable it here and add a part of your own with Agent.Add.
type (
	NodeResourcesOptions = upkeep.Options
	EvictionOptions      = upkeep.EvictionOptions
	GCOptions            = upkeep.GCOptions
	LogRotationOptions   = upkeep.LogRotationOptions
)
