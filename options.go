package nodekit

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/apiserver"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/hostpath"
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
	// NodeName is the name of the node the agent runs. Defaults to the
	// host name, lower-cased.
	NodeName string
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
	// renews its Lease. Defaults to nil: a standalone agent.
	KubeClient kubernetes.Interface
	// Node configures the Node registration, status and Lease (status every
	// 10s, reported at least every 5m, Lease of 40s renewed every 10s).
	// NodeName, MaxPods, Health and RuntimeVersion are the agent's. Used
	// only with KubeClient.
	Node node.Options
	// APISource configures the API-server pod source. NodeName is the
	// agent's. Used only with KubeClient.
	APISource apiserver.Options

	// Logger receives the agent's logs. Defaults to discarding them.
	Logger logr.Logger

	// MaxPods is the number of pods the agent admits at once; further pods
	// are rejected with phase Failed and reason OutOfpods. Defaults to 110.
	MaxPods int
	// Admit holds extra admission checks, run in order after the pod
	// count check; the first rejection wins.
	Admit []AdmitHandler

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
	// RuntimeStatusPeriod is how often the runtime's health (CRI Status)
	// is checked; while it is unhealthy the sync loop backs off. Defaults
	// to 5s.
	RuntimeStatusPeriod time.Duration

	// PLEG configures the default event generator. When the runtime
	// streams container events (CRI GetContainerEvents: containerd 2.x and
	// the in-memory runtime), the agent follows the stream with a relist
	// every 5m as a safety net, and falls back to relisting every 1s while
	// the stream is unavailable (containerd 1.6 answers Unimplemented);
	// other runtimes are relisted every 1s. Ignored when EventGenerator is
	// set.
	PLEG pleg.EventedOptions
	// DisableEventedPLEG makes the agent relist every PLEG.RelistPeriod
	// even when the runtime streams events.
	DisableEventedPLEG bool
	// EventGenerator replaces the generic PLEG. It must keep Cache up to
	// date.
	EventGenerator pleg.EventGenerator
	// Cache is the pod status cache EventGenerator fills; required with
	// EventGenerator, otherwise ignored.
	Cache pleg.Cache

	// RootDir is the agent's directory: pod directories and their volumes
	// live under <RootDir>/pods. Two agents in one process need two.
	// Defaults to /var/lib/nodekit.
	RootDir string
	// Volumes configures the volume manager (reconcile every 100ms, wait
	// at most 2m3s for a pod's volumes, refresh configMap, secret,
	// downwardAPI and projected volumes every 1m). Its Plugins default to
	// hostPath (configured by HostPath), emptyDir and downwardAPI, plus
	// configMap, secret and projected (service-account tokens included)
	// with KubeClient; its RootDir is RootDir.
	Volumes volume.Options
	// Objects gets the ConfigMaps and Secrets the pods refer to, for the
	// containers' environment and the configMap and secret volumes (one
	// source for both). Defaults, with KubeClient, to the API server's
	// through an objects.Cache (read again after Volumes.RefreshPeriod, 1m
	// by default, and when a new pod refers to them); without, to none.
	Objects objects.Getter
	// HostPath configures the hostPath plugin: AllowedHostPaths restricts
	// the host paths pods may mount (nil allows all, as the kubelet).
	HostPath hostpath.Options

	// Cgroups configures the pod cgroups (cgroupfs, v1 or v2): a node root
	// (default "kubepods"), the burstable and besteffort QoS cgroups, one
	// cgroup per pod passed to the runtime as its sandbox's cgroup parent.
	// Set Cgroups.Disabled for an agent on a host it does not own, or whose
	// runtime runs no processes. Two agents on one host need two roots.
	Cgroups cgroup.PodManagerOptions
	// Capacity is what the node offers pods; admission rejects a pod whose
	// requests exceed it (reason OutOfcpu, OutOfmemory). Defaults to the
	// machine's CPUs and memory.
	Capacity v1.ResourceList

	// Probes configures the liveness, readiness and startup probes. Its
	// Runtime (for exec probes) defaults to Runtime; Statuses is the
	// agent's.
	Probes probe.Options

	// RuntimeManager configures the pod-level runtime manager (container
	// restart back-off 10s doubling to 300s, log directory, ...).
	RuntimeManager runtime.ManagerOptions

	// WrapHandler, when set, wraps the default sync handler (a *Handler):
	// use it to observe or change how the loop's work is handled.
	WrapHandler func(syncloop.SyncHandler) syncloop.SyncHandler
	// WrapPodSyncer, when set, wraps or replaces the per-pod sync the pod
	// workers call (a *PodSyncer: the kubelet's SyncPod,
	// SyncTerminatingPod, SyncTerminatedPod).
	WrapPodSyncer func(*PodSyncer) podworker.SyncFuncs
	// Extra channels the sync loop also selects over; each value received
	// names pods to sync.
	Extra []syncloop.Channel

	// Events receives the pod lifecycle events. Defaults to the API
	// server's events (through client-go's broadcaster) with KubeClient,
	// and to none without.
	Events EventRecorder
	// EventFilter, when set, keeps the events for which it returns true
	// and drops the others, whichever the recorder. WarningEvents keeps
	// the Warning events only: with it a pod start writes only the pod's
	// status to the API server, not the Normal Pulled, Created and Started
	// events (three more writes), which suits nodes at scale.
	EventFilter func(eventtype, reason string) bool

	// OnPodStatus, when set, is called after each change of a pod's status
	// (phase, conditions, containers). It must not block.
	OnPodStatus func(pod *v1.Pod, status v1.PodStatus)
}

func (o *Options) setDefaults() error {
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
	if (o.EventGenerator == nil) != (o.Cache == nil) {
		return errors.New("nodekit: Options.EventGenerator and Options.Cache go together")
	}
	if o.RootDir == "" {
		o.RootDir = volume.DefaultRootDir
	}
	if o.MaxPods == 0 {
		o.MaxPods = 110
	}
	if o.MaxPods < 0 {
		return fmt.Errorf("nodekit: MaxPods %d is negative", o.MaxPods)
	}
	defaultDuration(&o.SyncPeriod, time.Second)
	defaultDuration(&o.HousekeepingPeriod, 2*time.Second)
	defaultDuration(&o.ResyncInterval, time.Minute)
	defaultDuration(&o.ErrorBackOff, 10*time.Second)
	defaultDuration(&o.RuntimeStatusPeriod, 5*time.Second)
	for _, d := range []time.Duration{o.SyncPeriod, o.HousekeepingPeriod, o.ResyncInterval, o.ErrorBackOff, o.RuntimeStatusPeriod} {
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
