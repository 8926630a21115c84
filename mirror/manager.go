package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/sources"
)

// Options configures a Manager.
type Options struct {
	// NodeName is the node the agent runs as: mirror pods are bound to it
	// and owned by its Node object. Required.
	NodeName string
	// Node returns the Node object the agent registered (for example
	// node.Controller.Node), whose UID the owner reference of each mirror
	// pod names; false while there is none. Defaults to reading the Node
	// from the API server, once per Sync that creates a mirror pod.
	Node func() (*v1.Node, bool)
	// Pods, when set, returns the pods bound to the node as a cache that
	// follows the API server holds them, and whether the cache completed
	// its first list: the agent passes the Pods method of its API source
	// (apiserver.Source.Pods). While it reports synced, Sync takes the
	// node's pods from it instead of listing them, and sends no request
	// unless a mirror pod is to be created or deleted; it still lists
	// while the cache does not show the mirror pods it created or deleted
	// (see the package doc). Pods bound to another node are ignored; the
	// pods are only read. It is called at most once per Sync and must not
	// block. Defaults to listing at every Sync.
	Pods func() (pods []*v1.Pod, synced bool)
	// OnCreate, when set, is called after a mirror pod was created, with the
	// static pod and the mirror pod: the agent asks its status manager to
	// write the static pod's status to it at once. It must not block.
	// Defaults to nothing.
	OnCreate func(static, mirror *v1.Pod)
	// RequestTimeout bounds each API request. Defaults to 10s.
	RequestTimeout time.Duration
	// Logger receives the manager's logs. Defaults to discarding them.
	Logger logr.Logger
}

func (o *Options) setDefaults() error {
	if o.NodeName == "" {
		return errors.New("mirror: Options.NodeName is required")
	}
	if o.RequestTimeout < 0 {
		return fmt.Errorf("mirror: Options.RequestTimeout %v is negative", o.RequestTimeout)
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 10 * time.Second
	}
	return nil
}

// Stats counts the API requests a Manager sent, failed ones included.
type Stats struct {
	// Lists of the node's pods.
	Lists uint64
	// Gets of the Node or of a pod that already existed.
	Gets uint64
	// Creates of mirror pods.
	Creates uint64
	// Deletes of stale, deleted or orphaned mirror pods.
	Deletes uint64
}

// Writes is the number of requests that change the API server's state.
func (s Stats) Writes() uint64 { return s.Creates + s.Deletes }

func (s Stats) total() uint64 { return s.Lists + s.Gets + s.Creates + s.Deletes }

const (
	// awayRetryInitial is the first wait, after a Sync found the API
	// server unreachable, before a Sync sends requests again; it doubles
	// at each failed attempt up to awayRetryMax.
	awayRetryInitial = 2 * time.Second
	awayRetryMax     = 8 * time.Second
)

// Manager keeps a mirror pod in the API server for each static pod of the
// node. Build it with New; the agent's housekeeping calls Sync. Its
// methods are safe for concurrent use; calls of Sync are serialised.
type Manager struct {
	client kubeclient.Interface
	opts   Options
	log    logr.Logger

	// syncMu serialises Sync.
	syncMu sync.Mutex
	// listed is set after the node's pods were first read (listed or
	// taken from Options.Pods); Sync skips reading them while there is
	// nothing to keep or remove. Only Sync touches it.
	listed bool
	// expected holds, with Options.Pods, what the manager knows of the
	// mirror pods it wrote that Options.Pods may not show yet: by full
	// name, the UID of the mirror pod under that name, "" for none.
	// Creating a mirror pod, finding it on AlreadyExists or deleting it
	// sets its name; a list updates the names set to what it found. Sync
	// takes the node's pods from Options.Pods only when they agree with
	// every entry, and then clears it; it lists them otherwise. Only Sync
	// touches it.
	expected map[string]types.UID
	// blocked are the static pods whose name a pod that is not a mirror
	// holds, already logged. Only Sync touches it.
	blocked map[string]bool
	// awaySince is when a Sync first found the API server unreachable,
	// zero while it is reachable; retryAt and retryDelay are the back-off
	// of the Syncs meanwhile. Only Sync touches them.
	awaySince, retryAt time.Time
	retryDelay         time.Duration
	// waiting is set while Sync has work it put off (see Waiting).
	waiting atomic.Bool

	mu sync.Mutex
	// mirrors are the node's mirror pods by full name, as last read,
	// created or deleted.
	mirrors map[string]*v1.Pod

	lists, gets, creates, deletes atomic.Uint64
}

// New returns a Manager that creates mirror pods through client. It does
// no I/O and starts no goroutine.
func New(client kubeclient.Interface, opts Options) (*Manager, error) {
	if client == nil {
		return nil, errors.New("mirror: client is required")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Manager{
		client:   client,
		opts:     opts,
		log:      opts.Logger.WithName("mirror").WithValues("node", opts.NodeName),
		mirrors:  make(map[string]*v1.Pod),
		blocked:  make(map[string]bool),
		expected: make(map[string]types.UID),
	}, nil
}

// MirrorPod returns the current mirror pod of the static pod as last seen
// (read by Sync or created): one whose config.mirror annotation matches the
// static pod's hash and that is not being deleted. The pod must not be
// modified.
func (m *Manager) MirrorPod(static *v1.Pod) (*v1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp, ok := m.mirrors[podmodel.FullName(static)]
	if !ok || mp.DeletionTimestamp != nil || !podmodel.IsMirrorOf(mp, static) {
		return nil, false
	}
	return mp, true
}

// Stats returns the requests sent so far.
func (m *Manager) Stats() Stats {
	return Stats{Lists: m.lists.Load(), Gets: m.gets.Load(), Creates: m.creates.Load(), Deletes: m.deletes.Load()}
}

// Waiting reports whether the last Sync put off work that a later Sync must
// do even though nothing changes meanwhile: it found the API server
// unreachable and backs off, or it waits for Options.Pods' first list.
// The agent's housekeeping calls Sync at every pass while it is set.
func (m *Manager) Waiting() bool { return m.waiting.Load() }

// Sync makes the node's mirror pods match staticPods, the static pods the
// agent runs: it reads the pods bound to the node (from Options.Pods while
// that is synced and shows the mirror pods as the manager last created,
// deleted or listed them, else by listing them), deletes each mirror pod
// that is being deleted (a user deleted it) or stale (its config.mirror
// hash is not its static pod's config.hash) and creates the missing ones,
// then deletes the mirror pods whose static pod is gone. Pods in staticPods
// that are not static are ignored. Deletions use grace period 0 and the
// mirror's UID as a precondition; a pod with a static pod's name that is
// not a mirror pod is never touched.
//
// While there are no static pods and the last read found no mirror pods,
// Sync reads nothing and sends no request; nor does it list the node's
// pods while there are no static pods and Options.Pods has not completed
// its first list: it waits for it. It returns the errors of the requests
// that failed; the next Sync tries again. A request that finds the API
// server unreachable (no reply, a timeout, 429, 500 or 503) is not
// returned: Sync logs one error when the API server goes away and one
// line when it is back, and backs off meanwhile (2s doubling to 8s,
// returning nil at once until then), so that housekeeping neither sends
// requests to nor logs an error at every pass for an API server that is
// down.
func (m *Manager) Sync(ctx context.Context, staticPods []*v1.Pod) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	err := m.sync(ctx, staticPods)
	m.waiting.Store(!m.awaySince.IsZero() || !m.listed)
	return err
}

func (m *Manager) sync(ctx context.Context, staticPods []*v1.Pod) error {
	want := make(map[string]*v1.Pod, len(staticPods))
	for _, p := range staticPods {
		if podmodel.IsStatic(p) {
			want[podmodel.FullName(p)] = p
		}
	}
	m.mu.Lock()
	known := len(m.mirrors)
	m.mu.Unlock()
	if m.listed && len(want) == 0 && known == 0 {
		if !m.awaySince.IsZero() {
			m.log.V(1).Info("No mirror pods left to keep; no longer waiting for the API server")
			m.awaySince = time.Time{}
		}
		return nil
	}
	if !m.listed && len(want) == 0 && m.opts.Pods != nil {
		if _, synced := m.opts.Pods(); !synced {
			// Only orphans to look for: they can wait for the cache.
			m.log.V(4).Info("No static pods and the pod cache not synced; waiting for it")
			return nil
		}
	}
	now := time.Now()
	if !m.awaySince.IsZero() && now.Before(m.retryAt) {
		m.log.V(4).Info("API server unreachable; backing off", "retryAt", m.retryAt)
		return nil
	}
	sent := m.Stats().total()
	err := m.reconcile(ctx, want)
	var errs []error
	var away error
	for _, e := range joined(err) {
		if ctx.Err() == nil && unreachable(e) {
			away = cmp.Or(away, e)
			continue
		}
		errs = append(errs, e)
	}
	switch {
	case away != nil && m.awaySince.IsZero():
		m.awaySince, m.retryDelay = now, awayRetryInitial
		m.log.Error(away, "API server unreachable; mirror pods wait for it, retrying with back-off")
	case away != nil:
		m.retryDelay = min(2*m.retryDelay, awayRetryMax)
		m.log.V(4).Info("API server still unreachable", "err", away.Error(), "retryIn", m.retryDelay)
	case !m.awaySince.IsZero() && m.Stats().total() > sent:
		m.log.Info("API server reachable again; mirror pods reconciled", "awayFor", time.Since(m.awaySince).Round(time.Millisecond))
		m.awaySince = time.Time{}
	case !m.awaySince.IsZero():
		m.log.V(1).Info("Mirror pods up to date without a request; no longer waiting for the API server")
		m.awaySince = time.Time{}
	}
	if away != nil {
		m.retryAt = time.Now().Add(m.retryDelay)
	}
	return errors.Join(errs...)
}

// joined returns the errors err joins, or err alone.
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// unreachable reports whether err says the API server could not be
// reached or could not serve the request for now, rather than refused it.
func unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true // no reply: connection refused or reset, TLS, DNS
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err)
}

// reconcile reads the node's pods and creates and deletes mirror pods so
// that they match want, the static pods by full name.
func (m *Manager) reconcile(ctx context.Context, want map[string]*v1.Pod) error {
	mirrors, others, err := m.pods(ctx)
	if err != nil {
		return err
	}
	m.listed = true
	m.mu.Lock()
	m.mirrors = mirrors
	m.mu.Unlock()

	var errs []error
	blocked := make(map[string]bool)
	defer func() { m.blocked = blocked }()
	var node *v1.Node
	nodeRead := false
	for name, static := range want {
		cur, ok := mirrors[name]
		if ok && (cur.DeletionTimestamp != nil || !podmodel.IsMirrorOf(cur, static)) {
			m.log.V(1).Info("Deleting mirror pod to replace it", "pod", name, "podUID", cur.UID,
				"deleting", cur.DeletionTimestamp != nil, "mirrorHash", cur.Annotations[sources.AnnotationMirror], "hash", podmodel.Hash(static))
			if err := m.delete(ctx, cur); err != nil {
				errs = append(errs, err)
				continue
			}
			ok = false
		}
		if ok {
			continue
		}
		if others[name] {
			if !m.blocked[name] {
				m.log.Info("A pod that is not a mirror pod holds the static pod's name; not creating its mirror pod", "pod", name)
			}
			blocked[name] = true
			continue
		}
		if !nodeRead {
			node, err = m.node(ctx)
			nodeRead = true
			if err != nil {
				errs = append(errs, err)
			}
		}
		if node == nil {
			continue
		}
		if node.DeletionTimestamp != nil {
			m.log.V(1).Info("Node is being deleted; not creating mirror pod", "pod", name)
			continue
		}
		if err := m.create(ctx, static, node.UID); err != nil {
			errs = append(errs, err)
		}
	}
	for name, mp := range mirrors {
		if _, ok := want[name]; ok {
			continue
		}
		m.log.V(1).Info("Deleting orphaned mirror pod", "pod", name, "podUID", mp.UID)
		if err := m.delete(ctx, mp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pods returns the mirror pods bound to the node by full name, and the
// full names of its other pods: from Options.Pods when it is synced and
// agrees with m.expected, else from a list.
func (m *Manager) pods(ctx context.Context) (map[string]*v1.Pod, map[string]bool, error) {
	if m.opts.Pods == nil {
		return m.list(ctx)
	}
	pods, synced := m.opts.Pods()
	if !synced {
		m.log.V(4).Info("Pod cache not synced; listing the node's pods")
		return m.list(ctx)
	}
	mirrors, others := m.split(pods)
	for name, uid := range m.expected {
		if uidOf(mirrors, name) != uid {
			// The watch has not delivered a write of this manager yet,
			// or it delivered the write and a change that undid it
			// (a user deleted the mirror pod it created): a list tells.
			m.log.V(1).Info("Pod cache behind this manager's writes; listing the node's pods",
				"pod", name, "podUID", uid, "cachedUID", uidOf(mirrors, name))
			return m.list(ctx)
		}
	}
	clear(m.expected)
	return mirrors, others, nil
}

// list lists the pods bound to the node and splits them; the names in
// m.expected get the UID of the mirror pod listed under them.
func (m *Manager) list(ctx context.Context) (map[string]*v1.Pod, map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	m.lists.Add(1)
	list, err := m.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", m.opts.NodeName).String(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: listing the pods of node %s: %w", m.opts.NodeName, err)
	}
	pods := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	mirrors, others := m.split(pods)
	for name := range m.expected {
		m.expected[name] = uidOf(mirrors, name)
	}
	return mirrors, others, nil
}

// uidOf returns the UID of the mirror pod under name, "" for none.
func uidOf(mirrors map[string]*v1.Pod, name string) types.UID {
	if mp := mirrors[name]; mp != nil {
		return mp.UID
	}
	return ""
}

// expect records that the mirror pod under name now has the UID, "" for
// none, for the next Sync to check Options.Pods against.
func (m *Manager) expect(name string, uid types.UID) {
	if m.opts.Pods != nil {
		m.expected[name] = uid
	}
}

// split returns the node's mirror pods among pods by full name, and the
// full names of its other pods. Pods bound to another node are left out.
func (m *Manager) split(pods []*v1.Pod) (map[string]*v1.Pod, map[string]bool) {
	mirrors := make(map[string]*v1.Pod)
	others := make(map[string]bool)
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != m.opts.NodeName:
		case podmodel.IsMirror(p):
			mirrors[podmodel.FullName(p)] = p
		default:
			others[podmodel.FullName(p)] = true
		}
	}
	return mirrors, others
}

// node returns the Node for the owner references; nil when it is not
// registered.
func (m *Manager) node(ctx context.Context) (*v1.Node, error) {
	if m.opts.Node != nil {
		n, ok := m.opts.Node()
		if !ok {
			m.log.V(1).Info("Node not registered yet; not creating mirror pods")
			return nil, nil
		}
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	m.gets.Add(1)
	n, err := m.client.CoreV1().Nodes().Get(ctx, m.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		m.log.V(1).Info("Node not registered yet; not creating mirror pods")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: reading node %s: %w", m.opts.NodeName, err)
	}
	return n, nil
}

func (m *Manager) create(ctx context.Context, static *v1.Pod, nodeUID types.UID) error {
	name := podmodel.FullName(static)
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	m.creates.Add(1)
	created, err := m.client.CoreV1().Pods(static.Namespace).Create(ctx, newMirrorPod(static, m.opts.NodeName, nodeUID), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// The list or the cache was older than the pod; take the pod if
		// it is the mirror wanted, else leave it to the next Sync.
		m.gets.Add(1)
		got, gerr := m.client.CoreV1().Pods(static.Namespace).Get(ctx, static.Name, metav1.GetOptions{})
		if gerr != nil || !podmodel.IsMirrorOf(got, static) || got.DeletionTimestamp != nil {
			return fmt.Errorf("mirror: creating the mirror pod of %s: %w", name, err)
		}
		m.setMirror(name, got)
		m.expect(name, got.UID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("mirror: creating the mirror pod of %s: %w", name, err)
	}
	m.log.V(1).Info("Created mirror pod", "pod", name, "podUID", created.UID, "staticPodUID", static.UID)
	m.setMirror(name, created)
	m.expect(name, created.UID)
	if m.opts.OnCreate != nil {
		m.opts.OnCreate(static, created)
	}
	return nil
}

// delete deletes the mirror pod at once (grace period 0) if it still has
// its UID. A pod already gone or replaced counts as deleted.
func (m *Manager) delete(ctx context.Context, mp *v1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	m.deletes.Add(1)
	err := m.client.CoreV1().Pods(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      metav1.NewUIDPreconditions(string(mp.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("mirror: deleting mirror pod %s: %w", podmodel.FullName(mp), err)
	}
	m.expect(podmodel.FullName(mp), "")
	m.mu.Lock()
	if cur, ok := m.mirrors[podmodel.FullName(mp)]; ok && cur.UID == mp.UID {
		delete(m.mirrors, podmodel.FullName(mp))
	}
	m.mu.Unlock()
	return nil
}

func (m *Manager) setMirror(name string, mp *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mirrors[name] = mp
}
