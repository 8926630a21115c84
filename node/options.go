package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/version"
)

// Defaults, the kubelet's.
const (
	// DefaultMaxPods is the pods capacity.
	DefaultMaxPods = 110
	// DefaultStatusUpdateFrequency is how often the node status is computed
	// (the kubelet's nodeStatusUpdateFrequency).
	DefaultStatusUpdateFrequency = 10 * time.Second
	// DefaultStatusReportFrequency is the longest time between two status
	// reports when nothing changed (the kubelet's nodeStatusReportFrequency).
	DefaultStatusReportFrequency = 5 * time.Minute
	// DefaultLeaseDuration is the Lease's duration
	// (the kubelet's nodeLeaseDurationSeconds).
	DefaultLeaseDuration = 40 * time.Second
	// LeaseNamespace holds the nodes' Leases.
	LeaseNamespace = "kube-node-lease"
)

// Well-known labels every registered Node carries.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelOS       = "kubernetes.io/os"
	LabelArch     = "kubernetes.io/arch"
)

// Options configures a Controller.
type Options struct {
	// Labels are put on the Node at registration, and restored on an
	// existing Node that lacks them or has other values. The labels
	// kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch are
	// always set (these win over Labels). Defaults to none.
	Labels map[string]string
	// Taints are put on the Node when this controller creates it (the
	// kubelet's --register-with-taints); an existing Node keeps its own.
	// Defaults to none.
	Taints []v1.Taint
	// Hostname is the Node's Hostname address and its kubernetes.io/hostname
	// label. Defaults to the Node's name.
	Hostname string
	// InternalIP is the Node's InternalIP address. Defaults to the first
	// global unicast IPv4 address of the host's interfaces, found when Run
	// starts; none if there is none.
	InternalIP net.IP
	// MaxPods is the Node's pods capacity: an agent admits that many pods
	// at once, and rejects more with reason OutOfpods. Defaults to 110.
	MaxPods int
	// Machine is the hardware and software the Node reports. Defaults to
	// ReadMachine(EphemeralStoragePath), read when Run starts; hollow nodes
	// and tests pass their own.
	Machine *Machine
	// EphemeralStoragePath is the file system whose size is the Node's
	// ephemeral-storage capacity, when Machine is nil. Defaults to none:
	// no ephemeral-storage is reported.
	EphemeralStoragePath string
	// Capacity adds resources to the measured capacity, or overrides
	// measured ones (e.g. extended resources). Defaults to none. An agent
	// (package nodekit) also offers pods what it holds rather than the
	// machine's cpu and memory: admission rejects a pod whose requests,
	// with those of the pods already admitted, exceed it (reasons
	// OutOfcpu, OutOfmemory).
	Capacity v1.ResourceList
	// Reserved is subtracted from the capacity to give the allocatable
	// resources, beside SystemReserved, KubeReserved and
	// HardEvictionReserved. Defaults to none.
	Reserved v1.ResourceList
	// SystemReserved and KubeReserved are held back from pods for the
	// system's and the node agent's own use (the kubelet's
	// --system-reserved and --kube-reserved). Defaults to none.
	SystemReserved, KubeReserved v1.ResourceList
	// HardEvictionReserved returns what the hard eviction thresholds hold
	// back at the given capacity (eviction.HardReservation): allocatable is
	// capacity less SystemReserved, KubeReserved, Reserved and this, the
	// kubelet's formula. Defaults to none.
	HardEvictionReserved func(capacity v1.ResourceList) v1.ResourceList
	// Pressure returns the node's pressure conditions (MemoryPressure,
	// DiskPressure, PIDPressure: the eviction manager's), reported True;
	// the others False. Called once per status update. Defaults to none.
	Pressure func() []v1.NodeConditionType
	// Images lists the runtime's images for status.images (the 50 largest,
	// as the kubelet). Called once per status update; on error the Node's
	// are kept. Defaults to none: status.images is left alone.
	Images func(ctx context.Context) ([]*runtimeapi.Image, error)
	// Recorder receives the node's events (Starting, NodeReady,
	// NodeNotReady, NodeHasSufficientMemory, NodeHasDiskPressure, ...).
	// Defaults to none.
	Recorder EventRecorder
	// Health decides the Ready condition: nil means Ready, an error means
	// not Ready with the error as the message. The agent passes the
	// runtime's and the PLEG's health. Called once per status update.
	// Defaults to always healthy.
	Health func() error
	// RuntimeVersion returns the container runtime's name and version as
	// the Node reports it, e.g. "containerd://2.4.2". Called once per status
	// update; on error the last value stands. Defaults to none (empty).
	RuntimeVersion func(ctx context.Context) (string, error)
	// RuntimeHandlers returns the runtime's handlers, the RuntimeHandlers
	// of its CRI Status response, reported as status.runtimeHandlers (with
	// their recursiveReadOnlyMounts and userNamespaces features, which the
	// scheduler and the API server match pods against). Called once per
	// status update; on error the Node's are kept. Defaults to none:
	// status.runtimeHandlers is left alone. The Agent sets it to the
	// handlers its runtime health check last read from a ready runtime
	// (no CRI call of its own, as the kubelet's updateRuntimeUp keeps
	// them): it should return what it holds, not call the runtime.
	RuntimeHandlers func(ctx context.Context) ([]*runtimeapi.RuntimeHandler, error)
	// RuntimeFeatures returns the runtime's features, the Features of its
	// CRI Status response, reported as status.features
	// (supplementalGroupsPolicy, which the scheduler and the API server
	// match pods with supplementalGroupsPolicy: Strict against). Called
	// once per status update; on error, or when it returns nil (a runtime
	// that reports no features, such as containerd 1.6), the Node's are
	// kept. Defaults to none: status.features is left alone. The Agent
	// sets it to the features its runtime health check last read from a
	// ready runtime, as RuntimeHandlers: it should return what it holds,
	// not call the runtime.
	RuntimeFeatures func(ctx context.Context) (*runtimeapi.RuntimeFeatures, error)
	// AgentVersion is reported as the Node's kubelet version
	// (status.nodeInfo.kubeletVersion), which the control plane and tools
	// parse as a semantic version for the version skew between them and
	// the node. Defaults to the Kubernetes version nodekit follows with
	// nodekit's version as build metadata, v1.37.2+nodekit.v0.1.0
	// (version.Info.KubeletVersion): comparisons see v1.37.2, kubectl get
	// nodes shows both. nodekit's version as it is is also in the
	// annotation nodekit.io/version.
	AgentVersion string
	// KubeletPort is the port of the node's HTTP API, advertised in
	// status.daemonEndpoints.kubeletEndpoint.Port, where the API server
	// reaches it for logs, exec, port-forward and metrics. Defaults to 0:
	// no API advertised.
	KubeletPort int32
	// DeclaredFeatures are the features the node declares in
	// status.declaredFeatures (NodeDeclaredFeatures): names of
	// k8s.io/component-helpers/nodedeclaredfeatures, which the API server
	// and the scheduler match against what a pod or a pod update needs
	// (an in-place resize of pod-level resources, RestartAllContainers
	// rules, ...). The agent sets DeclaredFeatures(): the features nodekit
	// implements.
	// Defaults to none.
	DeclaredFeatures []string
	// StatusUpdateFrequency is how often the status is computed and compared
	// with the Node's. Defaults to 10s.
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency is the longest time between two status PATCHes
	// when the status did not change; a changed status is sent at once.
	// Defaults to 5m.
	StatusReportFrequency time.Duration
	// LeaseDuration is the Lease's duration. Defaults to 40s.
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often the Lease is renewed. Defaults to a
	// quarter of LeaseDuration.
	LeaseRenewInterval time.Duration
	// OnRepeatedHeartbeatFailure is called when renewing the Lease failed
	// several times in a row; the kubelet closes its connections to the API
	// server there. Defaults to nothing.
	OnRepeatedHeartbeatFailure func()
	// Logger receives the controller's logs. Defaults to discarding them.
	Logger logr.Logger
	// Nodes, when set, reads the Node each status pass starts from, in
	// place of a GET every StatusUpdateFrequency: a cache of the Nodes
	// that a watch keeps current (a client-go NodeLister is one), which
	// the agents of one process can share (hollow nodes do). A Node it
	// does not give is read with a GET, so that a deleted Node is
	// registered again as without it. The Node it gives is read, never
	// changed. Defaults to nil: a GET each pass, as the kubelet's (from
	// the API server's cache).
	Nodes NodeGetter
	// Periodic, when set, starts the status passes and the Lease
	// renewals, each on a goroutine that lasts the pass, in place of two
	// goroutines of the controller's own that wait between them: the
	// agents of one process can share one Driver (hollow nodes do). The
	// status passes are then StatusUpdateFrequency apart from the end of
	// one to the start of the next (the kubelet's sliding period) rather
	// than from start to start. Defaults to nil: the controller's own
	// goroutines.
	Periodic *periodic.Driver

	// nodeName is New's: the Node's name (and its Lease's).
	nodeName string
}

// NodeGetter returns a Node by name, or an error for a Node it does not
// hold (Options.Nodes).
type NodeGetter interface {
	Get(name string) (*v1.Node, error)
}

func (o *Options) setDefaults() error {
	if o.nodeName == "" {
		return errors.New("node: the node's name is required")
	}
	if o.MaxPods < 0 {
		return fmt.Errorf("node: negative MaxPods %d", o.MaxPods)
	}
	if o.KubeletPort < 0 || o.KubeletPort > 65535 {
		return fmt.Errorf("node: KubeletPort %d out of range", o.KubeletPort)
	}
	if o.StatusUpdateFrequency < 0 || o.StatusReportFrequency < 0 || o.LeaseDuration < 0 || o.LeaseRenewInterval < 0 {
		return errors.New("node: negative frequency, duration or interval")
	}
	if o.InternalIP != nil && o.InternalIP.To16() == nil {
		return fmt.Errorf("node: bad InternalIP %v", o.InternalIP)
	}
	if o.Hostname == "" {
		o.Hostname = o.nodeName
	}
	if o.MaxPods == 0 {
		o.MaxPods = DefaultMaxPods
	}
	if o.Machine != nil {
		m := *o.Machine
		o.Machine = &m
	}
	o.Capacity = o.Capacity.DeepCopy()
	o.Reserved = o.Reserved.DeepCopy()
	o.SystemReserved = o.SystemReserved.DeepCopy()
	o.KubeReserved = o.KubeReserved.DeepCopy()
	for what, l := range map[string]v1.ResourceList{"Reserved": o.Reserved, "SystemReserved": o.SystemReserved, "KubeReserved": o.KubeReserved} {
		for name, q := range l {
			if q.Sign() < 0 {
				return fmt.Errorf("node: negative %s %s", what, name)
			}
		}
	}
	if o.Health == nil {
		o.Health = func() error { return nil }
	}
	if o.AgentVersion == "" {
		o.AgentVersion = version.Get().KubeletVersion()
	}
	if o.StatusUpdateFrequency == 0 {
		o.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if o.StatusReportFrequency == 0 {
		o.StatusReportFrequency = DefaultStatusReportFrequency
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.LeaseDuration < time.Second {
		return fmt.Errorf("node: LeaseDuration %v is under a second", o.LeaseDuration)
	}
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = o.LeaseDuration / 4
	}
	labels := make(map[string]string, len(o.Labels)+3)
	for k, v := range o.Labels {
		labels[k] = v
	}
	o.Labels = labels
	o.Taints = append([]v1.Taint(nil), o.Taints...)
	o.Logger = o.Logger.WithName("node")
	return nil
}

// quantity is a resource quantity of n in the format Kubernetes uses for
// name.
func quantity(name v1.ResourceName, n int64) resource.Quantity {
	switch name {
	case v1.ResourceCPU, v1.ResourcePods:
		return *resource.NewQuantity(n, resource.DecimalSI)
	default:
		return *resource.NewQuantity(n, resource.BinarySI)
	}
}
