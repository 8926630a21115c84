package podruntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/env"
	nkobjects "github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/credentials"
)

// Options configure a Manager. The zero value is usable.
type Options struct {
	// Logger receives the manager's logs. Defaults to discarding them.
	Logger logr.Logger
	// RuntimeHandler is passed to RunPodSandbox and in image specs.
	// Defaults to "" (the runtime's default handler).
	RuntimeHandler string
	// PodRuntimeHandler returns the runtime handler of the sandbox of a
	// pod with a spec.runtimeClassName (its RuntimeClass's handler), as
	// the kubelet's RuntimeClass manager; an error (a RuntimeClass not
	// found) fails the sandbox's creation with the error as the
	// FailedCreatePodSandBox event's message, and the sync is retried.
	// Image specs keep RuntimeHandler, as the kubelet's default
	// (RuntimeClassInImageCriAPI off). Defaults to nil: every sandbox
	// gets RuntimeHandler.
	PodRuntimeHandler func(pod *v1.Pod) (string, error)
	// PodLogsDir is the root of the container logs: a container's log is
	// <PodLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log.
	// Defaults to /var/log/pods.
	PodLogsDir string
	// BackOff of container restarts (CrashLoopBackOff). Defaults to the
	// kubelet's: Initial 10s, Max 300s, Reset 10m.
	BackOff BackOffOptions
	// ImageBackOff of failed image pulls (ImagePullBackOff). Defaults to
	// Initial 10s, Max 300s, Reset 10m.
	ImageBackOff BackOffOptions
	// MaxParallelImagePulls is how many images are pulled at once. The pods
	// that need the same image at the same time always share one pull.
	// Defaults to 1: pulls are serialized, the kubelet's default
	// (serializeImagePulls).
	MaxParallelImagePulls int
	// MaxParallelStatusReads, when positive, is how many GetPodStatus
	// calls read from the runtime at once; the others wait their turn
	// before they send any request. A burst of pods (a thousand pod
	// workers reading their status together) otherwise holds every call's
	// request, stream and answer in memory at once while the runtime
	// answers them a few at a time, and the heap the Go runtime grows for
	// that peak stays fragmented by the pods' long-lived objects after the
	// burst. It trades CPU for memory: at 16, BenchmarkMemory measured
	// about 2 KiB less resident memory per pod at 1000 pods and 1 KiB less
	// at 10,000, for about a sixth more CPU per pod started at 10,000.
	// Defaults to 0: no limit, as the kubelet.
	MaxParallelStatusReads int
	// MinGracePeriod is the shortest time a container is given to stop
	// (unless a kill overrides the grace period). Defaults to 2s.
	MinGracePeriod time.Duration
	// Recorder, when set, receives the kubelet's events of the pods'
	// lifecycle (Pulling, Pulled, Failed, BackOff, Created, Started,
	// Killing, SandboxChanged, FailedCreatePodSandBox), recorded on the pod
	// with the container's field path (spec.containers{name}). Pass the
	// record.EventRecorder of a client-go EventBroadcaster. Defaults to nil:
	// no events.
	Recorder runtime.EventRecorder
	// RootDir is the agent's root directory. A container's
	// terminationMessagePath is a file of
	// <RootDir>/pods/<uid>/containers/<name>/, the kubelet's layout,
	// which volume.Manager creates and removes with the pod. Defaults to
	// "": no file is mounted (FallbackToLogsOnError still reads the log).
	RootDir string
	// NoPullRecordsFile keeps the image pull records in memory only, not
	// in <RootDir>/image_manager/pulled.json, which every pull rewrites:
	// for an agent never restarted on its RootDir (hollow nodes), whose
	// file would never be read. An agent restarted without the file takes
	// the images present as preloaded (see the package doc). Defaults to
	// false: with a RootDir the records are kept in the file.
	NoPullRecordsFile bool
	// DNS are the node's DNS settings for the pods' resolv.conf.
	DNS DNSOptions
	// HostsFile is the node's hosts file, the base of a host-network
	// pod's managed /etc/hosts. Defaults to /etc/hosts.
	HostsFile string
	// Env resolves each container's environment. Pass an env.Resolver
	// with the ConfigMaps and Secrets getter the volumes use, the node's
	// allocatable resources and addresses. Defaults to an env.Resolver
	// without a getter: values, $(VAR) references, fieldRefs and
	// resourceFieldRefs resolve, ConfigMap and Secret references fail
	// unless optional.
	Env EnvResolver
	// Secrets gets the Secrets of the pods' imagePullSecrets, whose
	// docker configs give the credentials of the image pulls (package
	// runtime/credentials). Pass the getter the environment and the
	// volumes use. Defaults to nil: a pod's imagePullSecrets cannot be
	// read (a FailedToRetrieveImagePullSecret event) and its images are
	// pulled without credentials.
	Secrets nkobjects.SecretGetter
	// NodeCredentials gives the registry logins that are not the pod's
	// Secrets, tried after those: a *credentials.Keyring of the caller's
	// logins, credentials.NodeFiles (the kubelet's node docker config
	// files), *credentials.Plugins (the kubelet's credential-provider
	// plugins), or a credentials.Providers of them. An image pulled with
	// a node-wide login may be used by every pod; one pulled with a
	// plugin's login for a service account token, by the pods of that
	// service account. Defaults to nil: none.
	NodeCredentials credentials.Provider
	// UserNamespaces gives each pod's sandbox and containers their user
	// namespace (package userns: the kubelet's ID mappings for
	// hostUsers: false). Defaults to nil: no user namespace is sent, and
	// a hostUsers: false pod fails with ErrUserNamespaces.
	UserNamespaces UserNamespaces
	// FileWork bounds the goroutines that make or remove pods' files (log
	// directories, /etc/hosts and termination-log files) at once: each
	// holds one of its slots (a value sent) while it does. Give the same
	// channel to the parts that do such work (the nodekit agent shares
	// one with the volume manager, volume.Options.FileWork), so that
	// their system calls together hold few threads. Defaults to a channel
	// of its own with room for filesParallelism.
	FileWork chan struct{}
}

// EnvResolver resolves the environment of container c of pod, whose
// sandbox has podIPs; an error fails the container's start with
// ErrCreateContainerConfig and the error's message. env.Resolver
// implements it.
type EnvResolver interface {
	Container(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]env.Var, error)
}

func (o *Options) setDefaults() error {
	if o.PodLogsDir == "" {
		o.PodLogsDir = runtime.DefaultPodLogsDir
	}
	if !filepath.IsAbs(o.PodLogsDir) {
		return fmt.Errorf("podruntime: PodLogsDir %q is not an absolute path", o.PodLogsDir)
	}
	o.PodLogsDir = filepath.Clean(o.PodLogsDir)
	if o.RootDir != "" && !filepath.IsAbs(o.RootDir) {
		return fmt.Errorf("podruntime: RootDir %q is not an absolute path", o.RootDir)
	}
	if o.BackOff.Initial < 0 || o.BackOff.Max < 0 || o.BackOff.Reset < 0 ||
		o.ImageBackOff.Initial < 0 || o.ImageBackOff.Max < 0 || o.ImageBackOff.Reset < 0 {
		return errors.New("podruntime: negative back-off duration")
	}
	o.BackOff.setDefaults()
	o.ImageBackOff.setDefaults()
	if o.MinGracePeriod < 0 {
		return errors.New("podruntime: negative MinGracePeriod")
	}
	if o.MaxParallelImagePulls < 0 {
		return errors.New("podruntime: negative MaxParallelImagePulls")
	}
	if o.MaxParallelStatusReads < 0 {
		return errors.New("podruntime: negative MaxParallelStatusReads")
	}
	if o.MinGracePeriod == 0 {
		o.MinGracePeriod = 2 * time.Second
	}
	if o.FileWork == nil {
		o.FileWork = make(chan struct{}, filesParallelism)
	} else if cap(o.FileWork) == 0 {
		return errors.New("podruntime: FileWork has no room")
	}
	if o.Env == nil {
		o.Env = env.New(env.Options{})
	}
	if o.DNS.ResolvConf == "" {
		o.DNS.ResolvConf = "/etc/resolv.conf"
	}
	if o.HostsFile == "" {
		o.HostsFile = "/etc/hosts"
	}
	return nil
}

// Manager turns pods into sandbox and container operations on a
// RuntimeService: the kubelet's kuberuntime manager. It keeps, per pod, the
// restart and image back-offs and the last reason a container failed to
// start; Forget drops them.
//
// A Manager is safe for concurrent use by several goroutines; callers must
// serialise the calls that concern one pod (the pod workers do). It holds
// no goroutine and needs no Run.
type Manager struct {
	rs   runtime.RuntimeService
	is   runtime.ImageService
	opts Options
	log  logr.Logger
	ev   events
	now  func() time.Time
	// hookClient sends the httpGet lifecycle hooks.
	hookClient *http.Client
	// clock times the waits of the termination ordering.
	clock clock.Clock
	// pulls coalesces the pulls of one image.
	pulls *puller
	// resolv is the host's resolver file, parsed once per version.
	resolv resolvConfCache
	// statusReads holds a token for each GetPodStatus reading from the
	// runtime (MaxParallelStatusReads); nil without a limit.
	statusReads chan struct{}
	// files holds a token for each goroutine making or removing a pod's
	// files (filesParallelism).
	files chan struct{}

	mu             sync.Mutex
	runtimeName    string
	containerBO    *backOff
	imageBO        *backOff
	reasons        map[types.UID]map[string]waitingReason
	termMessages   map[types.UID]map[string]string
	resizeErrors   map[types.UID]string
	lastBackOffGC  time.Time
	runtimeNameSet bool
}

// waitingReason is why a container last failed to start.
type waitingReason struct {
	reason  string
	message string
}

// New returns a Manager on the given services. It does no I/O.
func New(rs runtime.RuntimeService, is runtime.ImageService, opts Options) (*Manager, error) {
	if rs == nil {
		return nil, errors.New("podruntime: New needs a RuntimeService")
	}
	if is == nil {
		return nil, errors.New("podruntime: New needs an ImageService")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	m := &Manager{
		rs:           rs,
		is:           is,
		opts:         opts,
		log:          opts.Logger.WithName("runtime"),
		ev:           events{rec: opts.Recorder},
		files:        opts.FileWork,
		hookClient:   newHookClient(),
		now:          time.Now,
		clock:        clock.RealClock{},
		pulls:        newPuller(is, opts.MaxParallelImagePulls).persistIn(pullRecordsDir(opts), opts.Logger.WithName("runtime")),
		runtimeName:  "cri",
		containerBO:  newBackOff(opts.BackOff),
		imageBO:      newBackOff(opts.ImageBackOff),
		reasons:      map[types.UID]map[string]waitingReason{},
		termMessages: map[types.UID]map[string]string{},
		resizeErrors: map[types.UID]string{},
	}
	if opts.MaxParallelStatusReads > 0 {
		m.statusReads = make(chan struct{}, opts.MaxParallelStatusReads)
	}
	return m, nil
}

// PruneImageRecords forgets the image pull records of the image IDs not
// in present, a list of the runtime's images taken at listedAt (the
// kubelet's pruning of unknown records, after its image manager lists
// the images). The agent calls it from its image garbage collector.
func (m *Manager) PruneImageRecords(listedAt time.Time, present []string) {
	m.pulls.records.prune(listedAt, present)
}

// RuntimeName is the runtime's name as reported by Version ("containerd"),
// the prefix of container IDs in the API status; "cri" until a call to the
// runtime (Status, GetPods, GetPodStatus) learned it.
func (m *Manager) RuntimeName() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runtimeName
}

// learnRuntimeName asks the runtime its name once.
func (m *Manager) learnRuntimeName(ctx context.Context) {
	m.mu.Lock()
	done := m.runtimeNameSet
	m.mu.Unlock()
	if done {
		return
	}
	v, err := m.rs.Version(ctx, "v1")
	if err != nil {
		m.log.V(4).Info("runtime version unavailable", "err", err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := v.GetRuntimeName(); n != "" {
		m.runtimeName = n
	}
	m.runtimeNameSet = true
}

// Status checks the runtime's health with the Status RPC. It returns nil
// when both RuntimeReady and NetworkReady are true; otherwise an error
// wrapping ErrRuntimeNotReady and/or ErrNetworkNotReady that names the
// failing conditions with their reasons.
func (m *Manager) Status(ctx context.Context) error {
	m.learnRuntimeName(ctx)
	resp, err := m.rs.Status(ctx, false)
	if err != nil {
		return fmt.Errorf("runtime: status: %w", err)
	}
	st := resp.GetStatus()
	if st == nil {
		return fmt.Errorf("runtime: status is empty: %w", ErrRuntimeNotReady)
	}
	var errs []error
	for _, want := range []struct {
		typ string
		err error
	}{{runtimeapi.RuntimeReady, ErrRuntimeNotReady}, {runtimeapi.NetworkReady, ErrNetworkNotReady}} {
		var cond *runtimeapi.RuntimeCondition
		for _, c := range st.GetConditions() {
			if c.GetType() == want.typ {
				cond = c
			}
		}
		switch {
		case cond == nil:
			errs = append(errs, fmt.Errorf("%w: condition %s missing", want.err, want.typ))
		case !cond.GetStatus():
			errs = append(errs, fmt.Errorf("%w: %s=false reason:%s message:%s", want.err, want.typ, cond.GetReason(), cond.GetMessage()))
		}
	}
	return errors.Join(errs...)
}

// GetPods lists the pods in the runtime: sandboxes and containers grouped by
// their LabelPodUID (objects without it are not nodekit's and are left
// out). With all false, only ready sandboxes and running containers.
// Pods come sorted by UID, sandboxes and containers newest first.
func (m *Manager) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	m.learnRuntimeName(ctx)
	var sf *runtimeapi.PodSandboxFilter
	var cf *runtimeapi.ContainerFilter
	if !all {
		sf = &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
		cf = &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	}
	sandboxes, err := m.rs.ListPodSandbox(ctx, sf)
	if err != nil {
		return nil, fmt.Errorf("runtime: list sandboxes: %w", err)
	}
	containers, err := m.rs.ListContainers(ctx, cf)
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers: %w", err)
	}
	return runtime.PodsFromCRI(sandboxes, containers), nil
}

// GetPodStatus reads the pod's status from the runtime: its sandboxes
// (found by LabelPodUID) newest first, with the IPs of the newest one when
// it is ready, and the ContainerStatus of every container of the pod,
// newest first. Objects removed while it reads are skipped.
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	release, err := m.statusRead(ctx, uid)
	if err != nil {
		return nil, err
	}
	defer release()
	ps := &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: m.now()}
	sandboxes, err := m.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runtime.LabelPodUID: string(uid)}})
	if err != nil {
		return nil, fmt.Errorf("runtime: list sandboxes of pod %s: %w", uid, err)
	}
	ids := make([]string, len(sandboxes))
	for i, s := range sandboxes {
		ids[i] = s.GetId()
	}
	if err := m.readSandboxes(ctx, ps, ids); err != nil {
		return nil, err
	}
	containers, err := m.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{runtime.LabelPodUID: string(uid)}})
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers of pod %s: %w", uid, err)
	}
	if err := m.readContainers(ctx, ps, containers); err != nil {
		return nil, err
	}
	return ps, nil
}

// PodStatusAfterSync reads the pod's status after a sync of it from prev
// that returned result, as GetPodStatus reads it, but without listing the
// pod's sandboxes and containers: it reads those prev holds and those the
// sync created, which are all the pod has, since only the pod's syncs
// create its sandboxes and containers and prev was read after the
// previous sync. A pod's first start costs two runtime calls rather than
// four. It returns false, and reads nothing, when a step of the sync
// failed other than by waiting out a back-off (a failed creation may have
// left an object the sync does not know) or there is no prev: then read
// with GetPodStatus.
func (m *Manager) PodStatusAfterSync(ctx context.Context, uid types.UID, name, namespace string, prev *runtime.PodStatus, result SyncResult) (*runtime.PodStatus, bool, error) {
	if prev == nil || len(result.Results) == 0 {
		return nil, false, nil
	}
	for _, a := range result.Results {
		// A back-off wait made no runtime call.
		if a.Err != nil && !errors.Is(a.Err, ErrCrashLoopBackOff) && !errors.Is(a.Err, ErrImagePullBackOff) {
			return nil, false, nil
		}
	}
	release, err := m.statusRead(ctx, uid)
	if err != nil {
		return nil, true, err
	}
	defer release()
	ps := &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: m.now()}
	ids := make([]string, 0, len(prev.SandboxStatuses)+len(result.sandboxes))
	for _, s := range prev.SandboxStatuses {
		ids = append(ids, s.GetId())
	}
	for _, id := range result.sandboxes {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if err := m.readSandboxes(ctx, ps, ids); err != nil {
		return nil, true, err
	}
	containers := make([]*runtimeapi.Container, 0, len(prev.ContainerStatuses)+len(result.containers))
	for _, c := range prev.ContainerStatuses {
		containers = append(containers, &runtimeapi.Container{Id: c.ID, PodSandboxId: c.SandboxID})
	}
	for _, c := range result.containers {
		if !slices.ContainsFunc(containers, func(k *runtimeapi.Container) bool { return k.GetId() == c.GetId() }) {
			containers = append(containers, c)
		}
	}
	if err := m.readContainers(ctx, ps, containers); err != nil {
		return nil, true, err
	}
	return ps, true, nil
}

// statusRead takes a token of Options.MaxParallelStatusReads,
// when set, and returns the function that gives it back.
func (m *Manager) statusRead(ctx context.Context, uid types.UID) (func(), error) {
	m.learnRuntimeName(ctx)
	if m.statusReads == nil {
		return func() {}, nil
	}
	select {
	case m.statusReads <- struct{}{}:
		return func() { <-m.statusReads }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("runtime: status of pod %s: %w", uid, context.Cause(ctx))
	}
}

// readSandboxes reads the status of each sandbox of ids into ps, newest
// first, and the pod's IPs from the newest when it is ready. Sandboxes
// removed meanwhile are skipped.
func (m *Manager) readSandboxes(ctx context.Context, ps *runtime.PodStatus, ids []string) error {
	for _, id := range ids {
		resp, err := m.rs.PodSandboxStatus(ctx, id, false)
		if runtime.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("runtime: status of sandbox %s of pod %s: %w", id, ps.ID, err)
		}
		st := resp.GetStatus()
		if st == nil {
			return fmt.Errorf("runtime: status of sandbox %s of pod %s is empty", id, ps.ID)
		}
		ps.AddSandboxStatus(st)
	}
	return nil
}

// readContainers reads the status of each of containers into ps, newest
// first. Containers removed meanwhile are skipped.
func (m *Manager) readContainers(ctx context.Context, ps *runtime.PodStatus, containers []*runtimeapi.Container) error {
	for _, c := range containers {
		resp, err := m.rs.ContainerStatus(ctx, c.GetId(), false)
		if runtime.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("runtime: status of container %s of pod %s: %w", c.GetId(), ps.ID, err)
		}
		st := resp.GetStatus()
		if st == nil {
			return fmt.Errorf("runtime: status of container %s of pod %s is empty", c.GetId(), ps.ID)
		}
		m.addContainerStatus(ps, c, st)
	}
	return nil
}

// addContainerStatus adds the runtime's status st of container c to ps,
// with the termination message of an exited container.
func (m *Manager) addContainerStatus(ps *runtime.PodStatus, c *runtimeapi.Container, st *runtimeapi.ContainerStatus) {
	var msg string
	if st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		msg = m.terminationMessage(ps.ID, st)
	}
	ps.AddContainerStatus(c, st, msg)
}

// RemovePod removes every container and sandbox of the pod (stopping
// sandboxes first, as CRI requires), and its log directory. Call it after
// KillPod, once the pod is gone for good. It also forgets the pod.
func (m *Manager) RemovePod(ctx context.Context, uid types.UID) error {
	defer m.Forget(uid)
	sel := map[string]string{runtime.LabelPodUID: string(uid)}
	var errs []error
	containers, err := m.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("runtime: list containers of pod %s: %w", uid, err)
	}
	for _, c := range containers {
		if err := m.rs.RemoveContainer(ctx, c.GetId()); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("runtime: remove container %s of pod %s: %w", c.GetId(), uid, err))
		}
	}
	sandboxes, err := m.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("runtime: list sandboxes of pod %s: %w", uid, err))...)
	}
	logDirs := map[string]bool{}
	for _, s := range sandboxes {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := m.rs.StopPodSandbox(ctx, s.GetId()); err != nil && !runtime.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("runtime: stop sandbox %s of pod %s: %w", s.GetId(), uid, err))
				continue
			}
		}
		if err := m.rs.RemovePodSandbox(ctx, s.GetId()); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("runtime: remove sandbox %s of pod %s: %w", s.GetId(), uid, err))
			continue
		}
		md := s.GetMetadata()
		if md.GetUid() == string(uid) && md.GetName() != "" && md.GetNamespace() != "" {
			logDirs[runtime.PodLogsDirectory(m.opts.PodLogsDir, md.GetNamespace(), md.GetName(), uid)] = true
		}
	}
	if len(errs) == 0 {
		for dir := range logDirs {
			if filepath.Dir(dir) != m.opts.PodLogsDir {
				continue // a name with a path separator: not ours to remove
			}
			if err := m.onDisk(func() error { return os.RemoveAll(dir) }); err != nil {
				errs = append(errs, fmt.Errorf("runtime: remove log directory of pod %s: %w", uid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// filesParallelism bounds the goroutines that make or remove pods' files
// (log directories, /etc/hosts and termination-log files) at once. The pod
// workers and housekeeping of a churn each make a pod's files and remove
// another's at the same time, those in one parent directory wait for each
// other in the kernel, and a goroutine blocked in a system call holds a
// thread of its own, which the Go runtime keeps (and its memory) for as
// long as the agent runs: 1,000 pods started and removed at once made up
// to 180 threads.
const filesParallelism = 4

// onDisk runs f, which makes or removes a pod's files, once fewer than
// filesParallelism others do.
func (m *Manager) onDisk(f func() error) error {
	m.files <- struct{}{}
	defer func() { <-m.files }()
	return f()
}

// Forget drops what the manager keeps about the pod (back-off entries, the
// last reasons its containers failed to start).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.containerBO.forget(uid)
	m.imageBO.forget(uid)
	forget(&m.reasons, uid)
	forget(&m.termMessages, uid)
	forget(&m.resizeErrors, uid)
}

// forget deletes uid from *pods, and replaces the map by a new one when
// that emptied it: the pods of a churn grow it to thousands of entries,
// and a map keeps its room as it empties.
func forget[V any](pods *map[types.UID]V, uid types.UID) {
	if _, ok := (*pods)[uid]; !ok {
		return
	}
	delete(*pods, uid)
	if len(*pods) == 0 {
		*pods = map[types.UID]V{}
	}
}

// WaitingReason is why the pod's container is not running when its last
// start failed: the reason (ErrImagePull, ImagePullBackOff,
// CrashLoopBackOff, CreateContainerConfigError, RunContainerError, ...)
// and message of that failure, until a start succeeds or Forget. It
// implements status.WaitingReasons.
func (m *Manager) WaitingReason(uid types.UID, container string) (reason, message string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.reasons[uid][container]
	return r.reason, r.message, ok
}

// recordReasons updates the last-reason cache from a sync's start results:
// a failure records its reason, a success clears it.
func (m *Manager) recordReasons(uid types.UID, result SyncResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range result.Results {
		if a.Action != ActionStartContainer {
			continue
		}
		if a.Err == nil {
			if r := m.reasons[uid]; r != nil {
				delete(r, a.Target)
				if len(r) == 0 {
					delete(m.reasons, uid)
				}
			}
			continue
		}
		reason := Reason(a.Err)
		if reason == "" {
			reason = "RunContainerError"
		}
		r := m.reasons[uid]
		if r == nil {
			r = map[string]waitingReason{}
			m.reasons[uid] = r
		}
		r[a.Target] = waitingReason{reason: reason, message: a.Message}
	}
}
