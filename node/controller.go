package node

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/run"
)

// The registration back-off, the kubelet's.
const (
	registerBackoffInit = 100 * time.Millisecond
	registerBackoffMax  = 7 * time.Second
)

// Controller registers the Node, keeps its status and renews its Lease.
// Build it with New; Run does the work. Its methods are safe for
// concurrent use; Run must not be called concurrently with itself.
type Controller struct {
	client kubeclient.Interface
	opts   Options
	log    logr.Logger

	running atomic.Bool

	mu sync.Mutex
	// node is the Node as last read or written; nil until registered, and
	// again after it was found deleted.
	node *v1.Node
}

// New returns a Controller of the Node named nodeName (and its Lease),
// configured by opts, talking to client. It does no I/O and starts no
// goroutine.
func New(client kubeclient.Interface, nodeName string, opts Options) (*Controller, error) {
	if client == nil {
		return nil, errors.New("node: client is required")
	}
	opts.nodeName = nodeName
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Controller{client: client, opts: opts, log: opts.Logger.WithValues("node", opts.nodeName)}, nil
}

// Node returns a copy of the Node as last read or written, and false
// before it was registered (or while it is registered again after a
// deletion). Its UID is what owner references to the Node need.
func (c *Controller) Node() (*v1.Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node == nil {
		return nil, false
	}
	return c.node.DeepCopy(), true
}

// Addresses returns a copy of the Node's status.addresses as last read or
// written, and nil before it was registered: what Node gives of them
// without copying the whole Node (its images, conditions and capacity),
// for callers that read them at every pod sync (a pod's host IPs).
func (c *Controller) Addresses() []v1.NodeAddress {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node == nil {
		return nil
	}
	return slices.Clone(c.node.Status.Addresses)
}

// HostIPs are a node's internal addresses, for its pods' statuses
// (status.hostIPs) and their environment's HOST_IP: the InternalIP
// addresses of c's Node when the agent joined a cluster (c set), else
// fallback when set (Options.InternalIP of an agent without a cluster).
func HostIPs(c *Controller, fallback net.IP) []string {
	if c == nil {
		if fallback != nil {
			return []string{fallback.String()}
		}
		return nil
	}
	var ips []string
	for _, addr := range c.Addresses() {
		if addr.Type == v1.NodeInternalIP {
			ips = append(ips, addr.Address)
		}
	}
	return ips
}

func (c *Controller) setNode(n *v1.Node) {
	c.mu.Lock()
	c.node = n
	c.mu.Unlock()
}

// Run reads the machine, registers the Node (retrying with back-off until
// it succeeds), then keeps the Node's status and renews its Lease until ctx
// ends. It returns nil then, after its goroutines exited, and an error only
// when the machine cannot be read. API errors never stop it: they are
// logged and retried, and a Node found deleted is registered again.
func (c *Controller) Run(ctx context.Context) error { return run.Until(ctx, c) }

// Start is Run without waiting for ctx to end (run.Starter): it reads the
// machine, returns its error if that fails, and starts the rest. With
// Options.Periodic the registration, the status passes and the Lease
// renewals are the Driver's tasks, and the Controller holds no goroutine
// between them; else they run on goroutines of its own.
func (c *Controller) Start(ctx context.Context) (wait func(), err error) {
	if !c.running.CompareAndSwap(false, true) {
		return nil, errors.New("node: Run is already running")
	}
	f, err := c.facts()
	if err != nil {
		c.running.Store(false)
		return nil, err
	}
	c.event(EventStarting, "Starting node agent.")
	s := &statusLoop{c: c, facts: f}
	if d := c.opts.Periodic; d != nil {
		// The calls of one task never overlap: registered, backoff and
		// lease are the status task's alone until it stopped.
		var (
			registered bool
			backoff    = registerBackoffInit
			lease      *periodic.Task
		)
		status := d.Start(ctx, 0, func(ctx context.Context) time.Duration {
			if !registered {
				if !s.registerOnce(ctx) {
					wait := backoff
					backoff = min(2*backoff, registerBackoffMax)
					return wait
				}
				registered = true
				lease = d.Start(ctx, 0, c.leaseLoop().tick)
			}
			return s.tick(ctx)
		})
		return func() {
			status.Wait()
			if lease != nil {
				lease.Wait()
			}
			c.running.Store(false)
		}, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !s.register(ctx) {
			return
		}
		lease := make(chan struct{})
		go func() {
			defer close(lease)
			c.leaseLoop().run(ctx)
		}()
		s.run(ctx)
		<-lease
	}()
	return func() {
		<-done
		c.running.Store(false)
	}, nil
}

// facts reads the machine and the host's address, as the options say.
func (c *Controller) facts() (facts, error) {
	var m Machine
	if c.opts.Machine != nil {
		m = *c.opts.Machine
	} else {
		var err error
		if m, err = ReadMachine(c.opts.EphemeralStoragePath); err != nil {
			return facts{}, err
		}
	}
	ip := c.opts.InternalIP
	if ip == nil {
		var err error
		ip, err = hostIPv4()
		if err != nil || ip == nil {
			c.log.Info("no InternalIP address: no global unicast IPv4 address found", "err", err)
		}
	}
	if ip != nil {
		if ip4 := ip.To4(); ip4 != nil {
			ip = ip4
		}
	}
	return newFacts(c.opts, m, net.IP(ip)), nil
}

// runLease renews the Lease until ctx ends, as component-helpers' lease
// controller (the kubelet's) does.
// leaseLoop returns the loop that renews the Node's Lease.
func (c *Controller) leaseLoop() *leaseLoop {
	return &leaseLoop{
		client:            c.client.CoordinationV1().Leases(LeaseNamespace),
		name:              c.opts.nodeName,
		namespace:         LeaseNamespace,
		holder:            c.opts.nodeName,
		durationSeconds:   int32(c.opts.LeaseDuration / time.Second),
		interval:          c.opts.LeaseRenewInterval,
		onRepeatedFailure: c.opts.OnRepeatedHeartbeatFailure,
		postProcess:       c.setLeaseOwner,
		log:               c.log.WithName("lease"),
	}
}

// setLeaseOwner makes the registered Node the Lease's owner, so that the
// Lease goes with the Node. Before registration it blocks creating the
// Lease (an error), and keeps a Lease's existing owner.
func (c *Controller) setLeaseOwner(l *coordinationv1.Lease) error {
	n, ok := c.Node()
	if !ok || n.UID == "" {
		if len(l.OwnerReferences) == 0 {
			return errors.New("node: the Node is not registered: no owner for its Lease yet")
		}
		return nil
	}
	want := nodeOwner(n.Name, n.UID)
	refs := l.OwnerReferences[:0:0]
	found := false
	for _, r := range l.OwnerReferences {
		if r.APIVersion == "v1" && r.Kind == "Node" && r.Name == n.Name {
			if r.UID != n.UID || found {
				continue // a deleted Node's, or a duplicate
			}
			found = true
		}
		refs = append(refs, r)
	}
	if !found {
		refs = append(refs, want)
	}
	l.OwnerReferences = refs
	return nil
}

func nodeOwner(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
}

// statusLoop registers the Node and keeps its status. It runs in one
// goroutine.
type statusLoop struct {
	c     *Controller
	facts facts

	runtimeVersion string
	// lastReport is when the status was last written to the API server.
	lastReport time.Time
	// fastUntil ends the fast updates after start-up of tick (zero before
	// its first pass), fastDone once they ended.
	fastUntil time.Time
	fastDone  bool
}

// register creates the Node, or adopts an existing one (restoring the
// labels it lacks), retrying with back-off until it succeeds. It returns
// false when ctx ended first.
func (s *statusLoop) register(ctx context.Context) bool {
	backoff := registerBackoffInit
	for !s.registerOnce(ctx) {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, registerBackoffMax)
	}
	return true
}

// registerOnce tries to register the Node once, and logs a failure.
func (s *statusLoop) registerOnce(ctx context.Context) bool {
	c := s.c
	n, created, err := s.tryRegister(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error(err, "registering the node failed: retrying")
		}
		return false
	}
	c.setNode(n)
	if created {
		s.lastReport = time.Now()
		c.log.Info("registered the node", "uid", n.UID)
	} else {
		c.log.Info("the node exists: using it", "uid", n.UID)
	}
	return true
}

func (s *statusLoop) tryRegister(ctx context.Context) (*v1.Node, bool, error) {
	c := s.c
	nodes := c.client.CoreV1().Nodes()
	want := s.facts.newNodeObserved(c.opts.nodeName, c.opts.Taints, s.observe(ctx), time.Now())
	n, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		c.recordConditionEvents(v1.NodeStatus{}, n.Status)
		return n, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, err
	}
	n, err = nodes.Get(ctx, c.opts.nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	if patch, err := annotationsPatch(n, versionAnnotations()); err != nil {
		return nil, false, err
	} else if patch != nil {
		if n, err = nodes.Patch(ctx, c.opts.nodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, false, err
		}
	}
	patch, err := labelsPatch(n, s.facts.labels)
	if err != nil || patch == nil {
		return n, false, err
	}
	n, err = nodes.Patch(ctx, c.opts.nodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, false, err
	}
	return n, false, nil
}

// readRuntimeVersion asks Options.RuntimeVersion, keeping the last value
// on error.
func (s *statusLoop) readRuntimeVersion(ctx context.Context) string {
	if s.c.opts.RuntimeVersion == nil {
		return s.runtimeVersion
	}
	v, err := s.c.opts.RuntimeVersion(ctx)
	if err != nil {
		s.c.log.V(4).Info("reading the runtime version failed", "err", err)
		return s.runtimeVersion
	}
	s.runtimeVersion = v
	return v
}

// observe reads what the status reports beside the facts.
func (s *statusLoop) observe(ctx context.Context) observed {
	obs := observed{runtimeVersion: s.readRuntimeVersion(ctx), health: s.c.opts.Health(), images: s.readImages(ctx), runtimeHandlers: s.readRuntimeHandlers(ctx)}
	obs.features = s.readRuntimeFeatures(ctx)
	if s.c.opts.Pressure != nil {
		obs.pressure = s.c.opts.Pressure()
	}
	return obs
}

// run updates the status now and every StatusUpdateFrequency until ctx
// ends.
func (s *statusLoop) run(ctx context.Context) {
	t := time.NewTicker(s.c.opts.StatusUpdateFrequency)
	defer t.Stop()
	if !s.updateReady(ctx) {
		s.untilHealthy(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.update(ctx)
	}
}

// tick is run's work for a periodic.Driver (Options.Periodic), one pass
// per call: the first update, the fast updates of untilHealthy until the
// Node is Ready or the grace period ends, then one update each call. It
// returns when the next pass is due: StatusUpdateFrequency after this one
// returned (the kubelet's sliding period), 100ms while fast.
func (s *statusLoop) tick(ctx context.Context) time.Duration {
	const fast = 100 * time.Millisecond
	switch {
	case s.fastUntil.IsZero(): // the first pass
		s.fastUntil = time.Now().Add(nodeReadyGracePeriod)
		if s.updateReady(ctx) {
			s.fastDone = true
			return s.c.opts.StatusUpdateFrequency
		}
		return fast
	case !s.fastDone:
		if !time.Now().Before(s.fastUntil) || s.c.opts.Health() == nil && s.updateReady(ctx) {
			s.fastDone = true
			return s.c.opts.StatusUpdateFrequency
		}
		return fast
	}
	s.update(ctx)
	return s.c.opts.StatusUpdateFrequency
}

// readNode reads the Node from Options.Nodes, else from the API server.
func (c *Controller) readNode(ctx context.Context) (*v1.Node, error) {
	if c.opts.Nodes != nil {
		if n, err := c.opts.Nodes.Get(c.opts.nodeName); err == nil && n != nil {
			return n, nil
		}
	}
	return c.client.CoreV1().Nodes().Get(ctx, c.opts.nodeName, metav1.GetOptions{})
}

// nodeReadyGracePeriod bounds untilHealthy: the kubelet's.
const nodeReadyGracePeriod = 120 * time.Second

// untilHealthy is the kubelet's fast status update after start-up
// (fastNodeStatusUpdate), when the first update did not leave the Node
// Ready: while Health fails (the agent's first relist has not happened
// yet) it checks it every 100ms, and once it passes it updates the
// status, every 100ms until an update succeeds, so that a new
// Node is Ready at once rather than at the next tick. It gives up after
// the kubelet's 120s: a start that takes longer than StatusUpdateFrequency
// (many agents starting on one machine) still gets its Node Ready at once.
func (s *statusLoop) untilHealthy(ctx context.Context) {
	deadline := time.Now().Add(nodeReadyGracePeriod)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.c.opts.Health() == nil && s.updateReady(ctx) {
			return
		}
	}
}

// updateReady updates the status and reports whether the Node read or
// written has it with the health passing: the status the update computed
// is Ready. The health it read counts, not the health after it: one that
// passed while the update ran (reading the Node, many agents starting on
// one machine) left the Node NotReady, and the fast updates go on.
func (s *statusLoop) updateReady(ctx context.Context) bool {
	ok, healthy := s.update(ctx)
	return ok && healthy
}

// update reads the Node, computes its status and PATCHes it when it
// changed or StatusReportFrequency passed since the last report. A Node
// found deleted is registered again first. It reports whether the Node
// read or written has the status computed (false when a request failed),
// and whether the health that status reports passed.
func (s *statusLoop) update(ctx context.Context) (ok, healthy bool) {
	c := s.c
	nodes := c.client.CoreV1().Nodes()
	obs := s.observe(ctx)
	health := obs.health
	n, err := c.readNode(ctx)
	if apierrors.IsNotFound(err) {
		c.log.Info("the node was deleted: registering it again")
		c.setNode(nil)
		if !s.register(ctx) {
			return false, false
		}
		n, err = nodes.Get(ctx, c.opts.nodeName, metav1.GetOptions{})
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error(err, "reading the node failed")
		}
		return false, false
	}
	c.setNode(n)
	now := time.Now()
	status := s.facts.statusOf(n.Status, obs, now)
	if !statusChanged(n.Status, status) && now.Sub(s.lastReport) < c.opts.StatusReportFrequency {
		c.log.V(4).Info("node status unchanged: not reporting")
		return true, health == nil
	}
	patch, err := statusPatch(n, status)
	if err != nil {
		c.log.Error(err, "computing the status patch failed")
		return false, false
	}
	updated, err := nodes.Patch(ctx, c.opts.nodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error(err, "updating the node status failed")
		}
		return false, false
	}
	s.lastReport = now
	c.recordConditionEvents(n.Status, updated.Status)
	c.setNode(updated)
	c.log.V(4).Info("node status updated", "ready", health == nil)
	return true, health == nil
}
