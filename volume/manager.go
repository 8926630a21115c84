package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/volume/internal/hostfs"
)

// DefaultRootDir is the agent's root directory when none is given.
const DefaultRootDir = "/var/lib/nodekit"

// The kubelet's retry of a failed volume operation: 500ms, doubling, at
// most 2m2s (its exponentialbackoff package).
const (
	retryInitial = 500 * time.Millisecond
	retryMax     = 2*time.Minute + 2*time.Second
)

// waitPoll is how often WaitForPodVolumes looks again, the kubelet's
// podAttachAndMountRetryInterval.
const waitPoll = 300 * time.Millisecond

// dirPerm is the mode of the pod directories, as the kubelet's.
const dirPerm = 0o750

// AllowedHostPath is a host path that hostPath volumes may use, with
// everything below it; the PodSecurityPolicy field of the same name.
type AllowedHostPath struct {
	// PathPrefix is an absolute path; it matches whole path components:
	// /data allows /data and /data/x, not /database.
	PathPrefix string
	// ReadOnly allows the paths only for containers that all mount them
	// read-only (volumeMounts[].readOnly), unless another entry allows them
	// writable.
	ReadOnly bool
}

// Options configure a Manager. The zero value is usable: no plugins (every
// volume fails with ErrNoPlugin), pods under /var/lib/nodekit/pods.
type Options struct {
	// Plugins set up the volumes; for each volume the first plugin whose
	// CanSupport returns true is used. Names must be unique. Defaults to
	// none; the nodekit agent passes hostPath (with AllowedHostPaths),
	// emptyDir and downwardAPI, plus configMap, secret and projected when
	// it joins a cluster.
	Plugins []Plugin
	// AllowedHostPaths is the node's host-path policy: the host paths
	// that hostPath volumes may use. nil allows every path, as the kubelet
	// does; a non-nil list allows only the paths below its prefixes, so an
	// empty non-nil list allows none. The Manager checks that each prefix
	// is absolute and has no ".."; the hostPath plugin enforces the list
	// (hostpath.Options takes the same list; the nodekit agent passes this
	// one). Defaults to nil.
	AllowedHostPaths []AllowedHostPath
	// ReconcilePeriod is the period of Run's pass over every pod, a safety
	// net: between two, Run reconciles only the pods that changed (AddPod,
	// RemovePod) or have a retry or a refresh due, so an idle node costs
	// nothing however many pods it runs. Defaults to 1m. (The kubelet's
	// reconciler walks every pod every 100ms.)
	ReconcilePeriod time.Duration
	// RefreshPeriod is how often the volumes of plugins that implement
	// Refresher (configMap, secret, downwardAPI, projected) are set up
	// again with the latest pod, so that their content follows their
	// source; AddPod with a new version of the pod makes it due at once.
	// Defaults to 1m (the kubelet's sync frequency); negative disables it.
	RefreshPeriod time.Duration
	// WaitTimeout bounds WaitForPodVolumes. Defaults to 2m3s (the kubelet's
	// podAttachAndMountTimeout).
	WaitTimeout time.Duration
	// NoSubPathBind makes ContainerMounts return a subPath's resolved host
	// path rather than bind-mount it under the pod directory. Binding needs
	// CAP_SYS_ADMIN; without it the subPath is checked, but a container
	// that can write into the volume can swap a directory of the path for
	// a symlink between the check and the runtime's mount (the kubelet's
	// CVE-2017-1002101). Set it only for agents that run no untrusted
	// containers, or none at all (fake runtimes, tests). The nodekit agent
	// also passes it to the hostPath plugin (hostpath.Options.NoBind), for
	// the same reason. Defaults to false.
	NoSubPathBind bool
	// Logger receives volume set-up failures (V(1)), teardowns (V(1)) and
	// orphaned directories that cannot be removed. Defaults to discarding.
	Logger logr.Logger
	// FileWork bounds the goroutines that make or remove pod directories
	// at once: each holds one of its slots (a value sent) while it does.
	// Give the same channel to the parts that do such work (the nodekit
	// agent shares one with the pod-level runtime manager,
	// podruntime.Options.FileWork), so that their system calls together
	// hold few threads. Defaults to a channel of its own with room for
	// diskParallelism.
	FileWork chan struct{}
	// Periodic, when set, runs Run's passes as a task of the Driver,
	// which the agents of one process can share (hollow nodes do): the
	// Manager then holds no goroutine between them. Defaults to nil: a
	// goroutine of the Manager's own waits between them.
	Periodic *periodic.Driver
}

// withDefaults applies the defaults and validates the options.
func (o Options) withDefaults() (Options, error) {
	for _, a := range o.AllowedHostPaths {
		if !filepath.IsAbs(a.PathPrefix) || hostfs.HasBackstep(a.PathPrefix) {
			return o, fmt.Errorf("volume: allowed host path %q is not an absolute path without '..'", a.PathPrefix)
		}
	}
	if o.FileWork == nil {
		o.FileWork = make(chan struct{}, diskParallelism)
	} else if cap(o.FileWork) == 0 {
		return o, errors.New("volume: FileWork has no room")
	}
	if o.ReconcilePeriod == 0 {
		o.ReconcilePeriod = time.Minute
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = 2*time.Minute + 3*time.Second
	}
	if o.RefreshPeriod == 0 {
		o.RefreshPeriod = time.Minute
	}
	if o.ReconcilePeriod < 0 || o.WaitTimeout < 0 {
		return o, fmt.Errorf("volume: ReconcilePeriod (%v) and WaitTimeout (%v) must be positive", o.ReconcilePeriod, o.WaitTimeout)
	}
	seen := map[string]bool{}
	for i, p := range o.Plugins {
		if p == nil {
			return o, fmt.Errorf("volume: Plugins[%d] is nil", i)
		}
		name := p.Name()
		if err := CheckName("plugin name", EscapePluginName(name)); err != nil || name == "" {
			return o, fmt.Errorf("volume: Plugins[%d] has an invalid name %q", i, name)
		}
		if seen[EscapePluginName(name)] {
			return o, fmt.Errorf("volume: two plugins named %q", name)
		}
		seen[EscapePluginName(name)] = true
	}
	o.Plugins = slices.Clone(o.Plugins)
	return o, nil
}

// Manager keeps the volumes of the pods that should run set up and tears
// down the others, the kubelet's volume manager: a desired state (the pods
// given to AddPod or WaitForPodVolumes, and the volumes their containers
// mount), an actual state (the volumes set up), and a reconciliation that
// brings one towards the other, run by Run for each pod that needs it and,
// for one pod, by WaitForPodVolumes and ReleasePod.
//
// A Manager is safe for concurrent use. It lives as long as the agent.
type Manager struct {
	opts  Options
	dirs  PodDirs
	log   logr.Logger
	byDir map[string]Plugin             // by escaped name
	task  atomic.Pointer[periodic.Task] // Run's passes

	mu   sync.Mutex
	pods map[types.UID]*podEntry
	// dirty holds the pods whose desired state changed since Run last
	// reconciled them (podEntry.dirty), so that Run finds them without
	// looking at every pod.
	dirty map[types.UID]struct{}
	// nextDue is at or before the earliest podEntry.due: Run looks for
	// due pods only once it has passed.
	nextDue time.Time
	// scan is what the last CleanupOrphans saw.
	scan orphanScan
	// orphans remembers what was last logged about each orphaned pod
	// directory that could not be removed, to log it once.
	orphans map[types.UID]string
	// mounts reads the mount table once for the pods released at once
	// (each checks that nothing is mounted below its directory).
	mounts hostfs.MountTable
	// disk holds a token for each goroutine making or removing pod
	// directories (diskParallelism).
	disk chan struct{}
}

// diskParallelism bounds the goroutines that make or remove pod
// directories at once. The pod workers of a churn each make a pod's
// directories and remove another's at the same time; in one parent
// directory those calls wait for each other in the kernel, and a goroutine
// blocked in a system call holds a thread of its own, which the Go runtime
// keeps (and its memory) for as long as the agent runs: 2,000 pods started
// and released at once made up to 100 threads. Plugins' SetUp and TearDown
// are not bounded: one that hangs (an unreachable NFS server) must not
// hold up the other pods.
const diskParallelism = 4

// removeAll is os.RemoveAll through onDisk.
func (m *Manager) removeAll(dir string) error {
	return m.onDisk(func() error { return os.RemoveAll(dir) })
}

// onDisk runs f, which makes or removes pod directories, once fewer than
// diskParallelism others do.
func (m *Manager) onDisk(f func() error) error {
	m.disk <- struct{}{}
	defer func() { <-m.disk }()
	return f()
}

// podEntry is the desired and actual state of one pod.
type podEntry struct {
	uid types.UID
	// op is held while calling plugins or changing the pod's directories:
	// one operation at a time per pod.
	op sync.Mutex

	// The fields below are guarded by Manager.mu.

	// pod is the desired pod; nil when the pod should not run (its volumes
	// are to be torn down and its directory removed).
	pod *v1.Pod
	// actual is the actual state, which plan compares with pod.
	actual
	// dirty: the desired pod changed since Run last reconciled it.
	dirty bool
	// due is when the pod next needs Run (a retry, a refresh); zero when
	// it needs nothing until it changes.
	due time.Time
	// dead: removed from Manager.pods; whoever locked it looks again.
	dead bool
}

// newPodEntry returns the entry of a pod with nothing set up. Its maps are
// made when a volume is first set up or fails: most pods of many agents
// (and every pod of some) have no volume, and two empty maps would cost
// each of them about a hundred bytes.
func newPodEntry(uid types.UID) *podEntry {
	return &podEntry{uid: uid}
}

// NewManager returns a Manager of the pod directories under
// <rootDir>/pods (rootDir: the agent's root directory, DefaultRootDir when
// empty; two agents in one process need two); it does no I/O until it is
// used.
func NewManager(rootDir string, opts Options) (*Manager, error) {
	if rootDir == "" {
		rootDir = DefaultRootDir
	}
	if !filepath.IsAbs(rootDir) {
		return nil, fmt.Errorf("volume: root directory %q must be absolute", rootDir)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		opts:    opts,
		dirs:    PodDirs{Root: filepath.Clean(rootDir)},
		log:     opts.Logger.WithName("volume"),
		byDir:   map[string]Plugin{},
		disk:    opts.FileWork,
		pods:    map[types.UID]*podEntry{},
		dirty:   map[types.UID]struct{}{},
		orphans: map[types.UID]string{},
	}
	for _, p := range opts.Plugins {
		m.byDir[EscapePluginName(p.Name())] = p
	}
	return m, nil
}

// PodDirs returns the layout of the pod directories.
func (m *Manager) PodDirs() PodDirs { return m.dirs }

// Run reconciles the pods that need it: at once after AddPod or RemovePod,
// and when a failed operation's back-off (500ms doubling to 2m2s) ends or a
// refresh is due; and every pod every ReconcilePeriod. A reconciliation sets
// up the volumes of the desired pods that are not yet, and tears down the
// volumes and removes the directory of the pods no longer desired. It
// returns nil when ctx ends.
func (m *Manager) Run(ctx context.Context) error { return run.Until(ctx, m) }

// Start is Run without waiting for ctx to end (run.Starter). The passes
// are a task of Options.Periodic's, or of a goroutine of the Manager's own
// without one.
func (m *Manager) Start(ctx context.Context) (wait func(), err error) {
	var fullAt time.Time // the first pass is over every pod
	task := m.opts.Periodic.Start(ctx, 0, func(ctx context.Context) time.Duration {
		now := time.Now()
		full := !now.Before(fullAt)
		if full {
			fullAt = now.Add(m.opts.ReconcilePeriod)
		}
		next := fullAt
		if due := m.reconcileDue(ctx, now, full); !due.IsZero() && due.Before(next) {
			next = due
		}
		return time.Until(next)
	})
	if !m.task.CompareAndSwap(nil, task) {
		return nil, errors.New("volume: Run called twice")
	}
	return task.Wait, nil
}

// wake makes Run's next pass due at once (after the pass running, if one
// is); the first pass is at once anyway.
func (m *Manager) wake() {
	if t := m.task.Load(); t != nil {
		t.Reset(0)
	}
}

// reconcileDue reconciles every pod when full is set, else the pods that
// changed or are due at now; it returns when a pod is next due (zero for
// never).
func (m *Manager) reconcileDue(ctx context.Context, now time.Time, full bool) time.Time {
	m.mu.Lock()
	var uids []types.UID
	scan := scansAll(full, m.nextDue, now)
	if scan {
		for uid, e := range m.pods {
			if picks(full, e.dirty, e.due, now) {
				uids = append(uids, uid)
				e.dirty = false
			}
		}
	} else {
		for uid := range m.dirty {
			if e := m.pods[uid]; e != nil && e.dirty {
				uids = append(uids, uid)
				e.dirty = false
			}
		}
	}
	if len(m.dirty) > 0 {
		// Made anew rather than cleared: a burst grows it to every pod,
		// and a map keeps its room as it empties.
		m.dirty = make(map[types.UID]struct{})
	}
	m.mu.Unlock()
	for _, uid := range uids {
		if ctx.Err() != nil {
			return time.Time{}
		}
		e := m.lockPod(uid, false)
		if e == nil {
			continue
		}
		m.reconcilePod(ctx, e, pass{refresh: m.opts.RefreshPeriod > 0})
		m.unlockPod(e)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if scan {
		// Every due time is known again.
		m.nextDue = time.Time{}
		for _, e := range m.pods {
			m.nextDue = earlier(m.nextDue, e.due)
		}
	}
	return m.nextDue
}

// refresh sets up again, with the latest pod, one mounted volume whose
// plugin is a Refresher asking for it. A failed refresh leaves the volume
// set up as it was; its error is logged once. e.op is held.
func (m *Manager) refresh(ctx context.Context, e *podEntry, pod *v1.Pod, vol *v1.Volume) {
	m.mu.Lock()
	mv := e.mounted[vol.Name]
	m.mu.Unlock()
	_, err := mv.plugin.SetUp(ctx, SetUpRequest{Pod: pod, Volume: vol, Dir: mv.dir})
	m.mu.Lock()
	news := e.refreshDone(vol.Name, err)
	m.mu.Unlock()
	if news {
		m.log.V(1).Info("Refreshing volume failed; it keeps its content", "pod", podRef(pod), "podUID", e.uid, "volume", vol.Name, "err", err.Error())
	}
}

// AddPod makes the pod desired: Run sets up the volumes its containers
// mount. Calling it again with a newer version of the pod replaces it.
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	e := m.pods[pod.UID]
	if e == nil {
		e = newPodEntry(pod.UID)
		m.pods[pod.UID] = e
	}
	if e.pod == pod {
		// The same pod again (a sync of an unchanged pod): nothing new
		// for Run; WaitForPodVolumes reconciles the pod itself.
		m.mu.Unlock()
		return
	}
	// A new version of the pod (labels for the downward API, say): refresh
	// what depends on it.
	e.refreshAt = time.Time{}
	e.pod = pod
	m.markDirtyLocked(e)
	m.mu.Unlock()
	m.wake()
}

// markDirtyLocked records that the pod's desired state changed. m.mu is
// held.
func (m *Manager) markDirtyLocked(e *podEntry) {
	e.dirty = true
	m.dirty[e.uid] = struct{}{}
}

// RemovePod makes the pod undesired: Run tears down its volumes and removes
// its directory. Call it only once the pod's containers have stopped;
// ReleasePod does the same at once.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	if e := m.pods[uid]; e != nil {
		e.pod = nil
		m.markDirtyLocked(e)
	}
	m.mu.Unlock()
	m.wake()
}

// lockPod returns the pod's entry with its op lock held, creating it when
// create is set (nil otherwise when there is none).
func (m *Manager) lockPod(uid types.UID, create bool) *podEntry {
	for {
		m.mu.Lock()
		e := m.pods[uid]
		if e == nil {
			if !create {
				m.mu.Unlock()
				return nil
			}
			e = newPodEntry(uid)
			m.pods[uid] = e
		}
		m.mu.Unlock()
		e.op.Lock()
		m.mu.Lock()
		dead := e.dead
		m.mu.Unlock()
		if !dead {
			return e
		}
		e.op.Unlock()
	}
}

// unlockPod releases the entry's op lock, first dropping the entry when it
// holds nothing: not desired, nothing set up.
func (m *Manager) unlockPod(e *podEntry) {
	m.mu.Lock()
	if idle(e.pod, e.actual) {
		e.dead = true
		delete(m.pods, e.uid)
		if len(m.pods) == 0 {
			m.pods = make(map[types.UID]*podEntry) // a map keeps its room as it empties
		}
	}
	m.mu.Unlock()
	e.op.Unlock()
}

// reconcilePod brings one pod towards its desired state: it plans, then
// carries out the plan's steps (calling plugins, changing the pod's
// directories) and records their outcome in the pod's actual state; e.op
// is held.
func (m *Manager) reconcilePod(ctx context.Context, e *podEntry, p pass) {
	now := time.Now()
	defer m.setDue(e)
	m.mu.Lock()
	pod := e.pod
	steps, refreshDue := plan(pod, e.actual, now, p)
	if refreshDue {
		// Under the lock the plan was made under: a newer pod given to
		// AddPod after it keeps its refresh due at once.
		e.refreshAt = now.Add(m.opts.RefreshPeriod)
	}
	m.mu.Unlock()
	var tearDownErrs []error // of a pod being released
	for _, s := range steps {
		switch s.kind {
		case stepRefresh:
			m.refresh(ctx, e, pod, s.vol)
		case stepUnmount:
			err := m.tearDown(ctx, e, s.name)
			switch {
			case err == nil:
			case pod == nil:
				tearDownErrs = append(tearDownErrs, fmt.Errorf("volume %s: %w", s.name, err))
			default:
				m.log.V(1).Info("Tearing down volume failed", "podUID", e.uid, "volume", s.name, "err", err.Error())
			}
		case stepMakeDirs:
			err := m.makePodDirs(e.uid)
			m.mu.Lock()
			news := e.makeDirsDone(err, now)
			m.mu.Unlock()
			if err != nil {
				// A full or read-only disk: an operator must act, so at
				// error level, once per distinct error.
				if news {
					m.log.Error(err, "Creating pod directories failed", "pod", podRef(pod), "podUID", e.uid)
				}
				return
			}
		case stepMount:
			m.setUp(ctx, e, pod, s.vol, now)
		case stepRelease:
			gone, err := m.release(ctx, e.uid, tearDownErrs)
			m.mu.Lock()
			e.releaseDone(gone, err, now)
			m.mu.Unlock()
		}
	}
}

// setDue records when the pod next needs Run, and wakes Run when that is
// sooner than it was: a failure of WaitForPodVolumes, say. e.op is held.
func (m *Manager) setDue(e *podEntry) {
	m.mu.Lock()
	prev := e.due
	e.due = nextDue(e.pod, e.actual, m.opts.RefreshPeriod > 0)
	sooner := !e.due.IsZero() && (prev.IsZero() || e.due.Before(prev))
	m.nextDue = earlier(m.nextDue, e.due)
	m.mu.Unlock()
	if sooner {
		m.wake()
	}
}

func podRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// pluginFor returns the first plugin that supports vol.
func (m *Manager) pluginFor(vol *v1.Volume) Plugin {
	for _, p := range m.opts.Plugins {
		if p.CanSupport(vol) {
			return p
		}
	}
	return nil
}

// setUp sets up one volume of the pod and records the outcome; e.op is
// held.
func (m *Manager) setUp(ctx context.Context, e *podEntry, pod *v1.Pod, vol *v1.Volume, now time.Time) {
	mount, p, dir, err := m.doSetUp(ctx, e.uid, pod, vol)
	m.mu.Lock()
	news := e.setUpDone(vol.Name, mounted{mount: mount, plugin: p, dir: dir}, err, now)
	m.mu.Unlock()
	switch {
	case err == nil:
		m.log.V(1).Info("Volume set up", "pod", podRef(pod), "podUID", e.uid, "volume", vol.Name, "plugin", p.Name(), "hostPath", mount.HostPath, "readOnly", mount.ReadOnly)
	case news:
		m.log.V(1).Info("Setting up volume failed", "pod", podRef(pod), "podUID", e.uid, "volume", vol.Name, "err", err.Error())
	}
}

func (m *Manager) doSetUp(ctx context.Context, uid types.UID, pod *v1.Pod, vol *v1.Volume) (Mount, Plugin, string, error) {
	if err := CheckName("volume name", vol.Name); err != nil {
		return Mount{}, nil, "", err
	}
	p := m.pluginFor(vol)
	if p == nil {
		kind := SourceKind(vol)
		if kind == "" {
			kind = "no source"
		}
		return Mount{}, nil, "", fmt.Errorf("volume: %w for volume %s (%s)", ErrNoPlugin, vol.Name, kind)
	}
	dir := m.dirs.Volume(uid, p.Name(), vol.Name)
	if err := os.MkdirAll(filepath.Dir(dir), dirPerm); err != nil {
		return Mount{}, p, dir, fmt.Errorf("volume: %w", err)
	}
	mount, err := p.SetUp(ctx, SetUpRequest{Pod: pod, Volume: vol, Dir: dir})
	if err != nil {
		return Mount{}, p, dir, err
	}
	if mount.HostPath == "" || !filepath.IsAbs(mount.HostPath) {
		return Mount{}, p, dir, fmt.Errorf("volume: plugin %s set up volume %s at %q, not an absolute path", p.Name(), vol.Name, mount.HostPath)
	}
	mount.Name = vol.Name
	return mount, p, dir, nil
}

// tearDown tears down one volume set up by this Manager: its subPath
// mounts, then the plugin's part; e.op is held.
func (m *Manager) tearDown(ctx context.Context, e *podEntry, name string) error {
	m.mu.Lock()
	mv, ok := e.mounted[name]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	if err := m.cleanSubPaths(e.uid, name); err != nil {
		return err
	}
	if err := mv.plugin.TearDown(ctx, TearDownRequest{PodUID: e.uid, Name: name, Dir: mv.dir}); err != nil {
		return err
	}
	m.mu.Lock()
	e.tearDownDone(name)
	m.mu.Unlock()
	m.log.V(1).Info("Volume torn down", "podUID", e.uid, "volume", name, "plugin", mv.plugin.Name())
	return nil
}

// cleanSubPaths unmounts the subPath binds of one volume of the pod and
// removes their directory.
func (m *Manager) cleanSubPaths(uid types.UID, volume string) error {
	dir := filepath.Join(m.dirs.SubPaths(uid), volume)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := m.mounts.UnmountAll(dir); err != nil {
		return fmt.Errorf("volume: unmounting the subPaths of volume %s: %w", volume, err)
	}
	if err := m.mounts.RemoveAllUnmounted(dir, m.removeAll); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	return nil
}

// makePodDirs creates the pod's directory and its volumes, plugins and
// containers directories.
func (m *Manager) makePodDirs(uid types.UID) error {
	if err := CheckName("pod UID", string(uid)); err != nil {
		return err
	}
	// A new pod's directory is made with one call for each directory,
	// where MkdirAll would first look at each one and its parents; a
	// directory that is there already, or a parent missing, goes to
	// MkdirAll.
	return m.onDisk(func() error {
		fresh := os.Mkdir(m.dirs.Pod(uid), dirPerm) == nil
		for _, d := range []string{m.dirs.Volumes(uid), m.dirs.Plugins(uid), m.dirs.Containers(uid)} {
			if fresh && os.Mkdir(d, dirPerm) == nil {
				continue
			}
			if err := os.MkdirAll(d, dirPerm); err != nil {
				return Mark(fmt.Errorf("volume: creating the pod directory: %w", err), ErrPodDirectory)
			}
		}
		return nil
	})
}

// release releases the pod's directory once the volumes this Manager set
// up are torn down, errs holding the errors of those teardowns: it tears
// down the volumes found on disk (set up before a restart of the agent),
// unmounts its subPaths, and removes its directory unless a teardown
// failed or something is still mounted below it. gone reports that the
// directory is gone, or can never have been made (actual.released); the
// pod's op lock is held.
func (m *Manager) release(ctx context.Context, uid types.UID, errs []error) (gone bool, err error) {
	if err := CheckName("pod UID", string(uid)); err != nil {
		// Nothing of it can be on disk.
		return true, errors.Join(errs...)
	}
	errs = append(errs, m.tearDownFromDisk(ctx, uid)...)
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	podDir := m.dirs.Pod(uid)
	if err := m.mounts.UnmountAll(m.dirs.SubPaths(uid)); err != nil {
		return false, fmt.Errorf("volume: unmounting subPaths: %w", err)
	}
	if err := m.mounts.RemoveAllUnmounted(podDir, m.removeAll); err != nil {
		return false, fmt.Errorf("volume: removing the pod directory: %w", err)
	}
	m.log.V(1).Info("Pod directory removed", "podUID", uid)
	return true, nil
}

// tearDownFromDisk tears down the volumes found under the pod's volumes
// directory whose plugin is known: <volumes>/<escaped plugin>/<name>.
func (m *Manager) tearDownFromDisk(ctx context.Context, uid types.UID) []error {
	var errs []error
	var plugins []os.DirEntry
	err := m.onDisk(func() (err error) {
		plugins, err = os.ReadDir(m.dirs.Volumes(uid))
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return []error{fmt.Errorf("volume: %w", err)}
	}
	for _, pd := range plugins {
		p := m.byDir[pd.Name()]
		if p == nil || !pd.IsDir() {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(m.dirs.Volumes(uid), pd.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("volume: %w", err))
			continue
		}
		for _, vd := range vols {
			name := vd.Name()
			if err := m.cleanSubPaths(uid, name); err != nil {
				errs = append(errs, err)
				continue
			}
			req := TearDownRequest{PodUID: uid, Name: name, Dir: m.dirs.Volume(uid, p.Name(), name)}
			if err := p.TearDown(ctx, req); err != nil {
				errs = append(errs, fmt.Errorf("volume %s: %w", name, err))
				continue
			}
			m.log.V(1).Info("Volume torn down", "podUID", uid, "volume", name, "plugin", p.Name())
		}
	}
	return errs
}

// WaitForPodVolumes makes the pod desired (AddPod) and sets up the volumes
// its containers mount, retrying failed ones after their back-off, until
// all are set up; then it returns them by name (an empty map for a pod
// that mounts none). It first creates the pod's directories.
//
// It gives up after WaitTimeout, when ctx ends, or at once when a volume
// failed with an error that retrying does not cure (IsPermanent) or the
// pod's directories could not be created (ErrPodDirectory), and then
// returns a *WaitError naming the volumes not set up and the last error of
// each.
func (m *Manager) WaitForPodVolumes(ctx context.Context, pod *v1.Pod) (map[string]Mount, error) {
	m.AddPod(pod)
	timeout := time.NewTimer(m.opts.WaitTimeout)
	defer timeout.Stop()
	first := true
	for {
		e := m.lockPod(pod.UID, true)
		m.mu.Lock()
		if e.pod == nil {
			// Released meanwhile: want it again.
			e.pod = pod
		}
		m.mu.Unlock()
		m.reconcilePod(ctx, e, pass{force: first})
		first = false
		m.mu.Lock()
		mounts, werr := ready(pod, e.actual)
		m.mu.Unlock()
		m.unlockPod(e)
		if werr == nil {
			return mounts, nil
		}
		if werr.final() {
			return nil, werr
		}
		select {
		case <-ctx.Done():
			werr.Err = ctx.Err()
			return nil, werr
		case <-timeout.C:
			werr.Err = fmt.Errorf("timed out after %v: %w", m.opts.WaitTimeout, context.DeadlineExceeded)
			return nil, werr
		case <-time.After(waitPoll):
		}
	}
}

// PodVolumes returns the volumes of the pod that are set up (the actual
// state), by name.
func (m *Manager) PodVolumes(uid types.UID) map[string]Mount {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil {
		return nil
	}
	out := make(map[string]Mount, len(e.mounted))
	for name, mv := range e.mounted {
		out[name] = mv.mount
	}
	return out
}

// ReleasePod makes the pod undesired and, at once, tears down its volumes
// (those set up by this Manager and those found on disk from an earlier
// run), unmounts its subPaths and removes its directory. Call it once the
// pod's containers have all stopped (the pod worker's SyncTerminatedPod).
// When something is still mounted under the pod directory, or a teardown
// fails, it returns the error and keeps the rest; call it again later.
func (m *Manager) ReleasePod(ctx context.Context, uid types.UID) error {
	m.RemovePod(uid)
	e := m.lockPod(uid, true)
	m.reconcilePod(ctx, e, pass{force: true})
	m.mu.Lock()
	err := releaseErr(e.pod, e.actual)
	m.mu.Unlock()
	m.unlockPod(e)
	if err != nil {
		return fmt.Errorf("volume: releasing pod %s: %w", uid, err)
	}
	return nil
}

// CleanupOrphans is housekeeping: it makes the pods given to the Manager
// that are not in desired undesired, as RemovePod does, so that Run
// releases them (a pod stopped before its worker started has nobody else
// to release it), and it releases, as ReleasePod does, the pod
// directories under <root>/pods of pods that are neither in desired nor
// known to the Manager (left by pods that are gone, or by an earlier run
// of the agent): their volumes are torn down and their directories
// removed. A directory under which something is still mounted that no
// plugin set up is never removed; it is logged once and kept. Call it
// only once every pod source has been seen (the agent's housekeeping),
// with every pod the sources list and every pod whose containers may
// still run.
//
// A call with the same desired pods as the previous one, which left no
// orphaned directory, does not read the pods directory again (the Manager
// makes directories only for the pods it is given) unless ReconcilePeriod
// passed since it last did: housekeeping runs every 2 s, and reading a
// directory of thousands of pods each time is most of its cost.
func (m *Manager) CleanupOrphans(ctx context.Context, desired map[types.UID]bool) error {
	now := time.Now()
	m.mu.Lock()
	// Pods given to the Manager (AddPod) that are no longer desired: a
	// pod stopped before it started has no worker to release it.
	var undesired []types.UID
	for uid, e := range m.pods {
		if e.pod != nil && !desired[uid] {
			undesired = append(undesired, uid)
		}
	}
	skip := len(undesired) == 0 && m.scan.covers(desired, now, m.opts.ReconcilePeriod)
	m.mu.Unlock()
	if skip {
		return nil
	}
	clean := true
	defer func() {
		m.mu.Lock()
		m.scan = orphanScan{at: now, clean: clean, desired: fingerprint(desired)}
		m.mu.Unlock()
	}()
	// Run releases them, at once and off housekeeping's pass, as for
	// RemovePod; their directories are not orphans meanwhile.
	for _, uid := range undesired {
		m.RemovePod(uid)
	}
	var errs []error
	entries, err := os.ReadDir(m.dirs.Pods())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		clean = false
		return fmt.Errorf("volume: listing pod directories: %w", err)
	}
	onDisk := map[types.UID]bool{}
	for _, de := range entries {
		uid := types.UID(de.Name())
		onDisk[uid] = true
		if !orphanCandidate(uid, desired) {
			continue
		}
		m.mu.Lock()
		_, tracked := m.pods[uid]
		m.mu.Unlock()
		if tracked {
			// Run releases it (one of undesired, say), or it is in use:
			// the next pass looks again.
			clean = false
			continue
		}
		e := m.lockPod(uid, true)
		m.mu.Lock()
		known := claimed(e.pod, e.actual)
		m.mu.Unlock()
		if known {
			m.unlockPod(e)
			continue
		}
		gone, relErr := m.release(ctx, uid, nil) // nothing is mounted
		m.mu.Lock()
		e.released(gone, relErr)
		fate, log := judgeOrphan(relErr, m.orphans[uid])
		switch fate {
		case orphanRemoved:
			delete(m.orphans, uid)
		case orphanKept:
			m.orphans[uid] = relErr.Error()
		}
		m.mu.Unlock()
		m.unlockPod(e)
		if relErr != nil {
			clean = false
		}
		switch fate {
		case orphanRemoved:
			m.log.V(1).Info("Orphaned pod directory removed", "podUID", uid)
		case orphanKept:
			if log {
				m.log.Info("Orphaned pod directory kept: something is still mounted under it", "podUID", uid, "err", relErr.Error())
			}
		case orphanFailed:
			errs = append(errs, fmt.Errorf("volume: orphaned pod %s: %w", uid, relErr))
		}
	}
	m.mu.Lock()
	maps.DeleteFunc(m.orphans, func(uid types.UID, _ string) bool { return !onDisk[uid] })
	m.mu.Unlock()
	return errors.Join(errs...)
}
