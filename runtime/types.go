package runtime

import (
	"encoding/json"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unique"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels and annotations nodekit puts on every sandbox and container. They
// are the kubelet's keys, so tools that know the kubelet (crictl) show
// nodekit's pods the same way, and they carry everything a restarted agent
// needs to find its pods again.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	// LabelContainerHash holds the hash of the container's spec; a change
	// of hash makes the manager replace the container.
	LabelContainerHash = "io.kubernetes.container.hash"

	// AnnotationRestartCount holds the container's restart count, so
	// that it survives a restart of the agent.
	AnnotationRestartCount = "io.kubernetes.container.restartCount"
	// AnnotationContainerType holds the container's kind, one of the
	// ContainerType values.
	AnnotationContainerType = "io.kubernetes.container.type"
)

// The values of AnnotationContainerType.
const (
	ContainerTypeInit      = "init"
	ContainerTypeRegular   = "regular"
	ContainerTypeEphemeral = "ephemeral"
)

// HashContainer returns a stable hash of the container's spec: the FNV-64a
// of its JSON with Resources cleared (a resize does not replace the
// container), in hex. The pod runtime records it in LabelContainerHash
// and replaces a running container whose hash differs from its spec's.
func HashContainer(c *v1.Container) string {
	// A shallow copy: only its Resources are replaced, and marshalling
	// reads the rest as it is (every sync hashes every running container,
	// and a deep copy cost as much as the JSON).
	cp := *c
	cp.Resources = v1.ResourceRequirements{}
	data, err := json.Marshal(&cp)
	if err != nil {
		// v1.Container always marshals; keep a stable value regardless.
		data = []byte(c.Name)
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 16)
}

// DefaultPodLogsDir is the root of the container logs unless configured
// otherwise, as with the kubelet.
const DefaultPodLogsDir = "/var/log/pods"

// PodLogsDirectory returns the directory of the pod's container logs:
// <root>/<namespace>_<name>_<uid>.
func PodLogsDirectory(root, namespace, name string, uid types.UID) string {
	return filepath.Join(root, namespace+"_"+name+"_"+string(uid))
}

// ContainerState is the state of a container as the runtime reports it.
type ContainerState string

// The container states, as the kubelet names them.
const (
	ContainerStateCreated ContainerState = "created"
	ContainerStateRunning ContainerState = "running"
	ContainerStateExited  ContainerState = "exited"
	ContainerStateUnknown ContainerState = "unknown"
)

// StateFromCRI converts a CRI container state.
func StateFromCRI(s runtimeapi.ContainerState) ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return ContainerStateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerStateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerStateExited
	default:
		return ContainerStateUnknown
	}
}

// Pod is a pod as found in the runtime: its sandboxes and containers,
// grouped by the pod UID label.
type Pod struct {
	ID         types.UID
	Name       string
	Namespace  string
	Containers []*Container
	Sandboxes  []*Container
}

// Container is a container or a sandbox as listed by the runtime.
type Container struct {
	ID    string
	Name  string
	Image string
	// Hash is the spec hash recorded when the container was created.
	Hash  string
	State ContainerState
	// CreatedAt is the creation time, in nanoseconds since the epoch.
	CreatedAt int64
}

// PodStatus is the runtime's detailed view of one pod, the input of both
// the sync (what to do) and the API status (what to report).
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	// IPs of the pod, from its newest ready sandbox; the first is primary.
	IPs []string
	// ContainerStatuses, newest first within each container name.
	ContainerStatuses []*ContainerStatus
	// SandboxStatuses, newest first. They hold what the agent reads of a
	// sandbox (ID, metadata, state, creation time, network, namespace
	// options, runtime handler), not its labels, annotations or verbose
	// info: a cache keeps a PodStatus for every pod, and the maps of the
	// runtime's answer would weigh more than the rest of it.
	SandboxStatuses []*runtimeapi.PodSandboxStatus
	// TimeStamp is when this status was read from the runtime.
	TimeStamp time.Time
}

// FindContainerStatusByName returns the newest status of the named
// container, or nil.
func (s *PodStatus) FindContainerStatusByName(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ActiveSandboxID is the ID of the pod's current sandbox: the newest one,
// when it is ready; "" otherwise.
func (s *PodStatus) ActiveSandboxID() string {
	if s == nil || len(s.SandboxStatuses) == 0 {
		return ""
	}
	if sb := s.SandboxStatuses[0]; sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		return sb.GetId()
	}
	return ""
}

// FindActiveContainerStatusByName returns the newest status of the named
// container among those of the current sandbox (ActiveSandboxID), or nil:
// the kubelet judges initialization from these alone, so that containers
// left over from an earlier sandbox do not count.
func (s *PodStatus) FindActiveContainerStatusByName(name string) *ContainerStatus {
	active := s.ActiveSandboxID()
	if active == "" {
		return nil
	}
	for _, c := range s.ContainerStatuses {
		if c.Name == name && c.SandboxID == active {
			return c
		}
	}
	return nil
}

// ContainerStatus is the runtime's status of one container instance.
type ContainerStatus struct {
	ID   string
	Name string
	// SandboxID is the sandbox the container was created in.
	SandboxID    string
	State        ContainerState
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Image        string
	ImageRef     string
	Hash         string
	RestartCount int
	Reason       string
	Message      string
	// Resources the runtime reports for the container (CRI
	// ContainerStatus.resources); nil when it reports none.
	Resources *ContainerResources
}

// compactSandboxStatus returns the part of a sandbox's status that a
// PodStatus keeps (see PodStatus.SandboxStatuses), in two allocations
// (its messages, and its strings) rather than the dozen of the runtime's
// answer: a cache keeps one for every pod, and each small object the
// start of a burst of pods leaves behind can hold a page of the heap. The
// pod's name, namespace and UID in its metadata share the strings of ps
// (the pod's status it goes into) when they are equal, rather than being
// copied once more.
func compactSandboxStatus(st *runtimeapi.PodSandboxStatus, ps *PodStatus) *runtimeapi.PodSandboxStatus {
	b := &struct {
		status    runtimeapi.PodSandboxStatus
		metadata  runtimeapi.PodSandboxMetadata
		network   runtimeapi.PodSandboxNetworkStatus
		linux     runtimeapi.LinuxPodSandboxStatus
		namespace runtimeapi.Namespace
		options   runtimeapi.NamespaceOption
	}{}
	c := &b.status
	c.Id, c.State, c.CreatedAt, c.RuntimeHandler = st.GetId(), st.GetState(), st.GetCreatedAt(), st.GetRuntimeHandler()
	strs := append(make([]*string, 0, 7), &c.Id, &c.RuntimeHandler)
	if md := st.GetMetadata(); md != nil {
		c.Metadata = &b.metadata
		c.Metadata.Name, c.Metadata.Uid, c.Metadata.Namespace, c.Metadata.Attempt = md.GetName(), md.GetUid(), md.GetNamespace(), md.GetAttempt()
		for _, f := range []struct {
			p    *string
			same string
		}{{&c.Metadata.Name, ps.Name}, {&c.Metadata.Uid, string(ps.ID)}, {&c.Metadata.Namespace, ps.Namespace}} {
			if *f.p == f.same {
				*f.p = f.same
				continue
			}
			strs = append(strs, f.p)
		}
	}
	if n := st.GetNetwork(); n != nil {
		c.Network = &b.network
		c.Network.Ip, c.Network.AdditionalIps = n.GetIp(), n.GetAdditionalIps()
		strs = append(strs, &c.Network.Ip)
	}
	if opts := st.GetLinux().GetNamespaces().GetOptions(); opts != nil {
		c.Linux = &b.linux
		c.Linux.Namespaces = &b.namespace
		c.Linux.Namespaces.Options = &b.options
		o := &b.options
		o.Network, o.Pid, o.Ipc, o.TargetId, o.UsernsOptions = opts.GetNetwork(), opts.GetPid(), opts.GetIpc(), opts.GetTargetId(), opts.GetUsernsOptions()
		strs = append(strs, &o.TargetId)
	}
	packStrings(strs...)
	return c
}

// shared returns s, or an equal string whose memory other statuses share:
// for the values most pods repeat (container names, images, image
// references and spec hashes), which a cache of every pod's status would otherwise hold
// once per pod. The strings are canonicalized with package unique, whose
// table holds them weakly: the memory goes once no status refers to it.
func shared(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// packStrings makes the strings ps point to share one allocation, which
// they keep alive together.
func packStrings(ps ...*string) {
	n := 0
	for _, p := range ps {
		n += len(*p)
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range ps {
		b.WriteString(*p)
	}
	all, off := b.String(), 0
	for _, p := range ps {
		l := len(*p)
		*p = all[off : off+l]
		off += l
	}
}
