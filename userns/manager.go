package userns

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/run"
)

const (
	// DefaultIDsPerPod is the number of user and group IDs of a pod, the
	// kubelet's default (userNamespaces.idsPerPod).
	DefaultIDsPerPod = 1 << 16
	// unit is what IDsPerPod must be a multiple of.
	unit = 1 << 16
	// maxID is the highest ID a user namespace can map to: the kernel
	// refuses a mapping that reaches 2^32-1 (the invalid ID, (uid_t)-1).
	maxID = 1<<32 - 2
)

// Errors of PodUserNamespace, by class; errors.Is recognises them. Their
// messages are the kubelet's.
var (
	// ErrNotSupported: the pod's runtime handler has no user-namespace
	// support (CRI Status RuntimeHandlers[].Features.UserNamespaces).
	ErrNotSupported = errors.New("userns: runtime handler does not support user namespaces")
	// ErrExhausted: every block of the node's ID range is in use.
	ErrExhausted = errors.New("userns: no free user namespace range")
	// ErrHostNamespaces: hostUsers false with hostNetwork, hostPID or
	// hostIPC, which API validation forbids.
	ErrHostNamespaces = errors.New("userns: hostUsers false with a host namespace")
	// ErrVolumeDevices: hostUsers false with a container's volumeDevices,
	// which API validation forbids (block devices are neither idmapped
	// nor chowned).
	ErrVolumeDevices = errors.New("userns: hostUsers false with volume devices")
	// ErrBadMappings: the pod's mappings file cannot be used.
	ErrBadMappings = errors.New("userns: invalid user namespace mappings file")
	// ErrRange: the node's ID range or IDsPerPod is unusable.
	ErrRange = errors.New("userns: invalid user namespace ID range")
)

// classError is an error of a class whose message is its own.
type classError struct {
	class error
	msg   string
	// also is a second class of the same error, nil when none.
	also error
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Is(target error) bool {
	return target == e.class || (e.also != nil && target == e.also)
}

func classErrorf(class error, format string, args ...any) error {
	return &classError{class: class, msg: fmt.Sprintf(format, args...)}
}

// StatusGetter is the runtime's CRI Status, whose RuntimeHandlers say
// which handlers support user namespaces. runtime.RuntimeService
// implements it.
type StatusGetter interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// Options configure a Manager.
type Options struct {
	// RootDir is the agent's directory: a pod's mapping is the file
	// <RootDir>/pods/<uid>/userns. Required, absolute.
	RootDir string
	// Runtime answers which runtime handlers support user namespaces.
	// Defaults to nil: no handler does, and every hostUsers: false pod
	// fails to get a sandbox.
	Runtime StatusGetter
	// IDsPerPod is how many user and group IDs each pod gets, a multiple
	// of 65536. Defaults to 65536 (the kubelet's
	// userNamespaces.idsPerPod).
	IDsPerPod uint32
	// Range is the node's range of host IDs given to pods. Defaults to
	// nil: KubeletRange, the "kubelet" user's subordinate IDs or every ID
	// from IDsPerPod up, looked up when the Manager is first used.
	Range *Range
	// MaxPods is the agent's pod limit; the range must hold as many
	// pods. Defaults to 110.
	MaxPods int
	// CleanupPeriod is how often Run releases the mappings of pods whose
	// directory was removed, while a pod holds one. Defaults to 2s, the
	// kubelet's housekeeping period.
	CleanupPeriod time.Duration
	// Clock drives Run. Defaults to the real clock.
	Clock clock.WithTicker
	// Periodic, when set, runs Run's passes as a task of the Driver,
	// which the agents of one process can share (hollow nodes do): the
	// Manager then holds no goroutine between them, and Clock only tells
	// the time. Defaults to nil: Run's goroutine waits on Clock's timers.
	Periodic *periodic.Driver
	// Rand picks a free block. Defaults to a randomly seeded source.
	Rand *rand.Rand
	// Logger receives the Manager's logs. Defaults to discarding them.
	Logger logr.Logger
}

// Mapping is the user namespace of a pod: container IDs 0 to Length-1
// are host IDs HostID to HostID+Length-1, for users and groups alike.
type Mapping struct {
	HostID uint32
	Length uint32
}

// Manager allocates the ID ranges of pods with hostUsers: false, the
// kubelet's user namespace manager. It is safe for concurrent use and
// lives as long as the agent; Run releases the mappings of removed pods.
type Manager struct {
	opts   Options
	log    logr.Logger
	subIDs subIDSource

	mu     sync.Mutex
	ready  bool
	pool   pool
	usedBy map[types.UID]Mapping
	// used receives a value when a pod got a mapping, which Run then
	// watches; nil when Run does not run.
	used chan struct{}
	// task is Run's passes with Options.Periodic; watching tells that its
	// next pass is due within CleanupPeriod.
	task     *periodic.Task
	watching bool
	// initErr is the last failure to get ready that Run logged.
	initErr string
}

// New checks opts and returns a Manager. It does no I/O: the ID range is
// looked up and the pods' mappings read back from their directories when
// the Manager is first used (Run or PodUserNamespace).
func New(opts Options) (*Manager, error) {
	if opts.RootDir == "" || !filepath.IsAbs(opts.RootDir) {
		return nil, fmt.Errorf("userns: RootDir %q is not an absolute path", opts.RootDir)
	}
	if opts.IDsPerPod == 0 {
		opts.IDsPerPod = DefaultIDsPerPod
	}
	if opts.IDsPerPod%unit != 0 {
		return nil, classErrorf(ErrRange, "userns: kubelet user namespace length %v is not a multiple of %d", opts.IDsPerPod, unit)
	}
	if opts.MaxPods == 0 {
		opts.MaxPods = 110
	}
	if opts.MaxPods < 0 {
		return nil, fmt.Errorf("userns: negative MaxPods %d", opts.MaxPods)
	}
	if opts.CleanupPeriod < 0 {
		return nil, fmt.Errorf("userns: negative CleanupPeriod %s", opts.CleanupPeriod)
	}
	if opts.CleanupPeriod == 0 {
		opts.CleanupPeriod = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Manager{
		opts:   opts,
		log:    opts.Logger.WithName("userns"),
		subIDs: systemSubIDs(),
		usedBy: map[types.UID]Mapping{},
	}, nil
}

// Run makes the Manager ready (a failure is logged and tried again at
// each period) and then releases, every CleanupPeriod, the mapping of
// each pod whose mapping file is gone: the pod's directory was cleaned
// up. While no pod holds a mapping (no pod has hostUsers: false, as on
// most nodes) it has nothing to release and does not wake, where the
// kubelet's housekeeping looks every 2 s; the first mapping starts the
// periods again. It returns nil when ctx ends.
func (m *Manager) Run(ctx context.Context) error { return run.Until(ctx, m) }

// Start is Run without waiting for ctx to end (run.Starter). With
// Options.Periodic the passes are a task of the Driver's.
func (m *Manager) Start(ctx context.Context) (wait func(), err error) {
	if d := m.opts.Periodic; d != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.task = d.Start(ctx, 0, func(ctx context.Context) time.Duration {
			watching := m.housekeeping(ctx)
			m.mu.Lock()
			defer m.mu.Unlock()
			m.watching = watching
			if !watching {
				return periodic.Idle // until a mapping is made
			}
			return m.opts.CleanupPeriod
		})
		return m.task.Wait, nil
	}
	used := make(chan struct{}, 1)
	m.mu.Lock()
	m.used = used
	m.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.loop(ctx, used)
	}()
	return func() {
		<-done
		m.mu.Lock()
		m.used = nil
		m.mu.Unlock()
	}, nil
}

// loop is Run's loop without a Driver.
func (m *Manager) loop(ctx context.Context, used <-chan struct{}) {
	watching := m.housekeeping(ctx)
	for {
		if !watching {
			select {
			case <-ctx.Done():
				return
			case <-used:
			}
		}
		// A timer, which stops for good (a fake clock's ticker does not).
		t := m.opts.Clock.NewTimer(m.opts.CleanupPeriod)
		for watching = true; watching; {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			if watching = m.housekeeping(ctx); watching {
				t.Reset(m.opts.CleanupPeriod)
			}
		}
	}
}

// housekeeping gets the Manager ready, or releases the mappings of
// removed pods; it reports whether Run has anything to watch: the
// Manager is not ready, or a pod holds a mapping.
func (m *Manager) housekeeping(ctx context.Context) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		err := m.initLocked(ctx)
		if err != nil && err.Error() != m.initErr {
			// Once per distinct error, not at every period.
			m.log.Error(err, "User namespace manager not ready; pods with hostUsers: false cannot start")
		}
		m.initErr = ""
		if err != nil {
			m.initErr = err.Error()
			return true
		}
	}
	for uid := range m.usedBy {
		if _, err := os.Lstat(m.file(uid)); errors.Is(err, fs.ErrNotExist) {
			m.log.V(1).Info("Releasing the user namespace of a removed pod", "podUID", uid)
			m.releaseLocked(uid)
		}
	}
	return len(m.usedBy) > 0
}

// setUsedLocked gives the pod its mapping and tells Run.
func (m *Manager) setUsedLocked(uid types.UID, mp Mapping) {
	m.usedBy[uid] = mp
	if m.task != nil {
		if !m.watching {
			m.watching = true
			m.task.Reset(m.opts.CleanupPeriod)
		}
		return
	}
	select {
	case m.used <- struct{}{}:
	default:
	}
}

// initLocked looks up the ID range, checks it as the kubelet does and
// records the mappings found in the pod directories.
func (m *Manager) initLocked(ctx context.Context) error {
	ids := m.opts.IDsPerPod
	var r Range
	if m.opts.Range != nil {
		r = *m.opts.Range
	} else {
		var err error
		if r, err = m.subIDs.kubeletRange(ctx, ids); err != nil {
			return fmt.Errorf("kubelet mappings: %w", err)
		}
	}
	if r.First%ids != 0 {
		return classErrorf(ErrRange, "userns: kubelet user assigned ID %v is not a multiple of %v", r.First, ids)
	}
	if r.First < ids {
		// Mapping ID 0 would circumvent the isolation.
		return classErrorf(ErrRange, "userns: kubelet user assigned ID %v must be greater or equal to %v", r.First, ids)
	}
	if r.Length%ids != 0 {
		return classErrorf(ErrRange, "userns: kubelet user assigned IDs length %v is not a multiple of %v", r.Length, ids)
	}
	p := newPool(r, ids)
	if p.n < m.opts.MaxPods {
		return classErrorf(ErrRange, "userns: kubelet user assigned IDs are not enough to support %v pods", m.opts.MaxPods)
	}
	m.pool = p
	clear(m.usedBy)
	m.log.V(1).Info("User namespace range", "firstID", r.First, "length", r.Length, "idsPerPod", ids, "pods", p.n)

	entries, err := os.ReadDir(filepath.Join(m.opts.RootDir, "pods"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("userns: read pods from disk: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		mp, found, err := m.readLocked(uid)
		if err == nil && found {
			err = m.recordLocked(uid, mp)
		}
		if err != nil {
			// The kubelet refuses to start; nodekit runs every other pod
			// and fails this one's sandbox with the same error.
			m.log.Error(err, "Cannot record the user namespace of a pod found on disk", "podUID", uid, "file", m.file(uid))
		}
	}
	m.ready = true
	return nil
}

func (m *Manager) file(uid types.UID) string {
	return filepath.Join(m.opts.RootDir, "pods", string(uid), mappingsFile)
}

// PodUserNamespace returns the user namespace of the sandbox and every
// container of pod, whose sandbox runs on runtimeHandler, as the
// kubelet's GetOrCreateUserNamespaceMappings: the node's (mode NODE)
// unless the pod sets hostUsers: false; then its own (mode POD), read
// from its directory or allocated there.
func (m *Manager) PodUserNamespace(ctx context.Context, pod *v1.Pod, runtimeHandler string) (*runtimeapi.UserNamespace, error) {
	if pod == nil || pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if err := ValidatePod(pod); err != nil {
		return nil, err
	}
	if err := m.handlerSupported(ctx, runtimeHandler); err != nil {
		return nil, err
	}
	mp, err := m.podMapping(ctx, pod.UID)
	if err != nil {
		return nil, err
	}
	ids := []*runtimeapi.IDMapping{{HostId: mp.HostID, ContainerId: 0, Length: mp.Length}}
	gids := []*runtimeapi.IDMapping{{HostId: mp.HostID, ContainerId: 0, Length: mp.Length}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: gids}, nil
}

// ValidatePod is the API server's validation of hostUsers: false
// (validateHostUsers, v1.37.2, a new pod's options): it forbids
// hostNetwork, hostPID and hostIPC (ErrHostNamespaces) and any init, app
// or ephemeral container's volumeDevices (ErrVolumeDevices), with the API
// server's field paths and message.
func ValidatePod(pod *v1.Pod) error {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return nil
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	const msg = "when `hostUsers` is false"
	if pod.Spec.HostNetwork {
		errs = append(errs, field.Forbidden(spec.Child("hostNetwork"), msg))
	}
	if pod.Spec.HostPID {
		errs = append(errs, field.Forbidden(spec.Child("HostPID"), msg))
	}
	if pod.Spec.HostIPC {
		errs = append(errs, field.Forbidden(spec.Child("HostIPC"), msg))
	}
	nHost := len(errs)
	hostNS := nHost > 0
	devices := func(p *field.Path, i int, vd []v1.VolumeDevice) {
		if len(vd) > 0 {
			errs = append(errs, field.Forbidden(p.Index(i).Child("volumeDevices"), msg))
		}
	}
	for i := range pod.Spec.InitContainers {
		devices(spec.Child("initContainers"), i, pod.Spec.InitContainers[i].VolumeDevices)
	}
	for i := range pod.Spec.Containers {
		devices(spec.Child("containers"), i, pod.Spec.Containers[i].VolumeDevices)
	}
	for i := range pod.Spec.EphemeralContainers {
		devices(spec.Child("ephemeralContainers"), i, pod.Spec.EphemeralContainers[i].VolumeDevices)
	}
	hasDevices := len(errs) > nHost
	switch {
	case len(errs) == 0:
		return nil
	case hostNS && hasDevices:
		return &classError{class: ErrHostNamespaces, also: ErrVolumeDevices, msg: errs.ToAggregate().Error()}
	case hostNS:
		return &classError{class: ErrHostNamespaces, msg: errs.ToAggregate().Error()}
	default:
		return &classError{class: ErrVolumeDevices, msg: errs.ToAggregate().Error()}
	}
}

// handlerSupported checks the runtime handler's user-namespace feature
// with the kubelet's messages.
func (m *Manager) handlerSupported(ctx context.Context, handler string) error {
	supported, err := m.handlerSupportsUserNamespaces(ctx, handler)
	if err == nil && supported {
		return nil
	}
	msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	if handler != "" {
		msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
	}
	if err != nil {
		msg += ": " + err.Error()
	}
	return &classError{class: ErrNotSupported, msg: msg}
}

func (m *Manager) handlerSupportsUserNamespaces(ctx context.Context, handler string) (bool, error) {
	if m.opts.Runtime == nil {
		return false, errors.New("runtime handlers are not set")
	}
	resp, err := m.opts.Runtime.Status(ctx, false)
	if err != nil {
		return false, err
	}
	if len(resp.GetRuntimeHandlers()) == 0 {
		return false, errors.New("runtime handlers are not set")
	}
	for _, h := range resp.GetRuntimeHandlers() {
		if h.GetName() == handler {
			return h.GetFeatures().GetUserNamespaces(), nil
		}
	}
	return false, fmt.Errorf("the handler %q is not known", handler)
}

// podMapping reads the pod's mapping from its directory, or allocates
// one and writes it there.
func (m *Manager) podMapping(ctx context.Context, uid types.UID) (Mapping, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		if err := m.initLocked(ctx); err != nil {
			return Mapping{}, err
		}
	}
	mp, found, err := m.readLocked(uid)
	if err != nil {
		return Mapping{}, fmt.Errorf("user namespace: %w", err)
	}
	if found {
		if err := m.recordLocked(uid, mp); err != nil {
			return Mapping{}, fmt.Errorf("user namespace: %w", err)
		}
		return mp, nil
	}
	if prev, ok := m.usedBy[uid]; ok {
		// The file went away under a running allocation: free it first.
		m.log.V(1).Info("User namespace file missing, allocating again", "podUID", uid, "hostID", prev.HostID)
		m.releaseLocked(uid)
	}
	mp, err = m.allocateLocked(uid)
	if err != nil {
		return Mapping{}, fmt.Errorf("create user namespace: %w", err)
	}
	if err := writeMappings(filepath.Dir(m.file(uid)), mp); err != nil {
		m.releaseLocked(uid)
		return Mapping{}, fmt.Errorf("create user namespace: %w", err)
	}
	m.log.V(1).Info("Allocated a user namespace", "podUID", uid, "hostID", mp.HostID, "length", mp.Length)
	return mp, nil
}

func (m *Manager) readLocked(uid types.UID) (Mapping, bool, error) {
	data, err := os.ReadFile(m.file(uid))
	if errors.Is(err, fs.ErrNotExist) {
		return Mapping{}, false, nil
	}
	if err != nil {
		return Mapping{}, false, err
	}
	if len(data) == 0 {
		// As the kubelet: an empty file is no mapping.
		return Mapping{}, false, nil
	}
	mp, err := parseMappings(data)
	return mp, err == nil, err
}

// allocateLocked picks a free block at random, as the kubelet's
// allocator does.
func (m *Manager) allocateLocked(uid types.UID) (Mapping, error) {
	i, ok := m.pool.allocate(m.opts.Rand)
	if !ok {
		return Mapping{}, &classError{class: ErrExhausted, msg: "could not find an empty slot to allocate a user namespace"}
	}
	mp := Mapping{HostID: m.pool.hostID(i), Length: m.opts.IDsPerPod}
	m.setUsedLocked(uid, mp)
	return mp, nil
}

// recordLocked records a mapping read from the pod's directory, with
// the kubelet's checks; a mapping outside the node's current range
// (the range changed since) is kept for the pod, where the kubelet
// refuses to start.
func (m *Manager) recordLocked(uid types.UID, mp Mapping) error {
	ids := m.opts.IDsPerPod
	if mp.Length != ids {
		return classErrorf(ErrBadMappings, "wrong user namespace length %v", mp.Length)
	}
	if mp.HostID%ids != 0 {
		return classErrorf(ErrBadMappings, "wrong user namespace offset specified %v", mp.HostID)
	}
	if prev, found := m.usedBy[uid]; found {
		if prev != mp {
			return classErrorf(ErrBadMappings, "different user namespace range already used by pod %q", uid)
		}
		return nil
	}
	i, inPool := m.pool.index(mp.HostID)
	if inPool {
		if m.pool.has(i) {
			return classErrorf(ErrBadMappings, "range picked for pod %q already taken", uid)
		}
		m.pool.set(i)
	} else {
		for other, o := range m.usedBy {
			if o.HostID == mp.HostID {
				return classErrorf(ErrBadMappings, "range picked for pod %q already taken by pod %q", uid, other)
			}
		}
		m.log.Info("Pod keeps a user namespace outside the node's ID range", "podUID", uid, "hostID", mp.HostID)
	}
	m.setUsedLocked(uid, mp)
	return nil
}

// Release frees the pod's mapping and removes its file, as the
// kubelet's Release. Run does it by itself once the pod's directory is
// removed.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.usedBy[uid]; !ok {
		return
	}
	_ = os.Remove(m.file(uid))
	m.releaseLocked(uid)
}

func (m *Manager) releaseLocked(uid types.UID) {
	mp, ok := m.usedBy[uid]
	if !ok {
		return
	}
	delete(m.usedBy, uid)
	if i, inPool := m.pool.index(mp.HostID); inPool {
		m.pool.clear(i)
	}
}

// Allocated returns the pod's mapping, if it has one.
func (m *Manager) Allocated(uid types.UID) (Mapping, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp, ok := m.usedBy[uid]
	return mp, ok
}

// Free returns how many pods can still get a user namespace (0 until
// the Manager is ready).
func (m *Manager) Free() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pool.free
}
