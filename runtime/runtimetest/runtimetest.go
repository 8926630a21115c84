package runtimetest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Compile-time checks: Runtime is a complete nodekit runtime.
var (
	_ runtime.RuntimeService         = (*Runtime)(nil)
	_ runtime.ImageService           = (*Runtime)(nil)
	_ runtime.ContainerEventStreamer = (*Runtime)(nil)
)

// Options configures a Runtime. The zero value is a usable runtime with no
// images, no latency and no logging.
type Options struct {
	// Latency is how long every call waits before doing its work, giving
	// up early with a DeadlineExceeded or Canceled status when its context
	// ends. Defaults to 0 (calls return at once); negative counts as 0.
	Latency time.Duration
	// Images are present from the start, as if pulled. Defaults to none;
	// PullImage adds images on demand.
	Images []string
	// Logger receives a line for every container exit (V(4)). Defaults to
	// a logger that discards.
	Logger logr.Logger
}

// withDefaults applies the defaults. New cannot fail, so an invalid value
// (a negative Latency) is replaced by its default.
func (o Options) withDefaults() Options {
	if o.Latency < 0 {
		o.Latency = 0
	}
	o.Images = slices.Clone(o.Images)
	return o
}

// Runtime is an in-memory container runtime implementing nodekit's
// RuntimeService, ImageService and ContainerEventStreamer. It is safe for
// concurrent use. Create it with New and Close it when done to stop the
// timers of running container programs.
//
// Objects it returns (sandboxes, containers, statuses, images, events) are
// shared with the runtime and with other callers, and must not be modified.
type Runtime struct {
	opts    Options
	log     logr.Logger
	methods map[string]*methodState // fixed at New
	down    atomic.Bool

	mu          sync.RWMutex
	closed      bool
	seq         uint64
	sandboxes   map[string]*sandbox
	sandboxList []*sandbox // creation order, removed entries compacted lazily
	sandboxGone int
	containers  map[string]*container
	ctrList     []*container
	// byPod indexes sandboxes and containers by their pod UID label, so
	// that the lookups of one pod (the agent's GetPodStatus) do not scan
	// every object: creation order, removed entries deleted at once.
	sandboxesByPod  map[string][]*sandbox
	containersByPod map[string][]*container
	ctrGone         int
	images          map[string]*image // by normalised reference
	imagesByID      map[string]*image
	imageList       []*image
	ips             ipPool
	conditions      []*runtimeapi.RuntimeCondition
	execHandler     func(containerID string, cmd []string) (stdout, stderr []byte, exitCode int32)
	pullable        func(ref string) bool
	subs            map[*subscriber]struct{}
	subsChanged     chan struct{} // closed when subs changes; nil until waited on
	// onStatus are the functions OnStatusChange subscribed, called when
	// what Status answers may have changed.
	onStatus   map[int]func()
	onStatusID int
}

// methodState counts calls to one method and holds its injected error.
type methodState struct {
	calls  atomic.Int64
	inject atomic.Pointer[injection]
}

type injection struct {
	err  error
	once bool
}

// methodNames lists every method whose calls are counted and whose errors
// can be injected.
func methodNames() []string {
	return []string{
		"Version", "Status",
		"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus", "ListPodSandbox",
		"CreateContainer", "StartContainer", "StopContainer", "RemoveContainer", "ListContainers",
		"ContainerStatus", "UpdateContainerResources", "ExecSync",
		"ListImages", "ImageStatus", "PullImage", "RemoveImage",
		"GetContainerEvents",
	}
}

// New returns an empty runtime holding opts.Images. It starts no
// goroutine. A negative Latency counts as 0.
func New(opts Options) *Runtime {
	o := opts.withDefaults()
	r := &Runtime{
		opts:       o,
		log:        o.Logger.WithName("runtimetest"),
		methods:    make(map[string]*methodState),
		sandboxes:  make(map[string]*sandbox),
		containers: make(map[string]*container),

		sandboxesByPod:  make(map[string][]*sandbox),
		containersByPod: make(map[string][]*container),
		images:          make(map[string]*image),
		imagesByID:      make(map[string]*image),
		subs:            make(map[*subscriber]struct{}),
		conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		},
	}
	for _, name := range methodNames() {
		r.methods[name] = new(methodState)
	}
	for _, ref := range o.Images {
		r.addImageLocked(ref)
	}
	return r
}

// Close stops the timers of every running container program (the
// containers keep running until stopped) and ends every event stream. It
// is idempotent. Calls made after Close still work, but started programs
// no longer exit by themselves.
func (r *Runtime) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	for _, c := range r.containers {
		c.stopTimer()
	}
	r.endStreamsLocked(status.Error(codes.Unavailable, "runtimetest: runtime closed"))
}

func (r *Runtime) method(name string) *methodState {
	m, ok := r.methods[name]
	if !ok {
		// A misspelt method name in a test is a programming error: fail
		// loudly rather than let the test pass without doing what it says.
		panic(fmt.Sprintf("runtimetest: unknown method %q", name))
	}
	return m
}

// Calls returns how many times the named method (a RuntimeService,
// ImageService or ContainerEventStreamer method name, such as
// "ListContainers") was called, failed calls included. It panics on an
// unknown method name.
func (r *Runtime) Calls(method string) int {
	return int(r.method(method).calls.Load())
}

// InjectError makes every later call of the named method fail with err,
// until cleared with InjectError(method, nil). It panics on an unknown
// method name.
func (r *Runtime) InjectError(method string, err error) {
	m := r.method(method)
	defer r.statusMayChange(method)
	if err == nil {
		m.inject.Store(nil)
		return
	}
	m.inject.Store(&injection{err: err})
}

// InjectErrorOnce makes the next call of the named method fail with err.
// It replaces any error injected before for that method. It panics on an
// unknown method name.
func (r *Runtime) InjectErrorOnce(method string, err error) {
	m := r.method(method)
	defer r.statusMayChange(method)
	if err == nil {
		m.inject.Store(nil)
		return
	}
	m.inject.Store(&injection{err: err, once: true})
}

// SetDown makes every call fail with an Unavailable status while down is
// true, as when the runtime's socket has gone away; event streams end.
// The runtime's state is kept, and is visible again once down is false.
func (r *Runtime) SetDown(down bool) {
	r.down.Store(down)
	defer r.statusMayChange("Status")
	if down {
		r.mu.Lock()
		r.endStreamsLocked(errDown())
		r.mu.Unlock()
	}
}

func errDown() error {
	return status.Error(codes.Unavailable, "runtimetest: runtime is down")
}

// enter does what every call does first: count it, wait the latency, and
// fail if the runtime is down or an error was injected.
func (r *Runtime) enter(ctx context.Context, name string) error {
	m := r.methods[name]
	m.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if r.opts.Latency > 0 {
		t := time.NewTimer(r.opts.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if r.down.Load() {
		return errDown()
	}
	for {
		inj := m.inject.Load()
		if inj == nil {
			return nil
		}
		if !inj.once {
			return inj.err
		}
		if m.inject.CompareAndSwap(inj, nil) {
			return inj.err
		}
	}
}

// SetExecHandler sets what ExecSync runs. The handler gets the container ID
// and the command and returns the output and the exit code; a non-zero
// code makes ExecSync return a k8s.io/utils/exec.CodeExitError, as the CRI
// client does. A nil handler restores the default: succeed with no output.
// The handler is called without any lock held and may block.
func (r *Runtime) SetExecHandler(h func(containerID string, cmd []string) (stdout, stderr []byte, exitCode int32)) {
	r.mu.Lock()
	r.execHandler = h
	r.mu.Unlock()
}

// SetPullable decides which image references PullImage can pull; the
// others fail with a NotFound status. A nil function restores the
// default: every image pulls.
func (r *Runtime) SetPullable(pullable func(ref string) bool) {
	r.mu.Lock()
	r.pullable = pullable
	r.mu.Unlock()
}

// OnStatusChange calls f at each change of what Status may answer
// (SetCondition, SetDown, an error injected into or cleared from Status)
// until the returned stop is called: the runtime pushes its health, so
// that an agent need not poll it while it is healthy (see nodekit's
// RuntimeStatusPeriod). f runs with the Runtime's lock held: it must not
// block or call the Runtime.
func (r *Runtime) OnStatusChange(f func()) (stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.onStatus == nil {
		r.onStatus = map[int]func(){}
	}
	r.onStatusID++
	id := r.onStatusID
	r.onStatus[id] = f
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.onStatus, id)
	}
}

// statusMayChange calls the OnStatusChange functions when method is
// Status.
func (r *Runtime) statusMayChange(method string) {
	if method != "Status" {
		return
	}
	r.mu.Lock()
	r.statusChangedLocked()
	r.mu.Unlock()
}

func (r *Runtime) statusChangedLocked() {
	for _, f := range r.onStatus {
		f()
	}
}

// SetCondition sets a runtime condition reported by Status (RuntimeReady
// and NetworkReady start true), adding it if the type is new.
func (r *Runtime) SetCondition(condType string, ok bool, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.statusChangedLocked()
	c := &runtimeapi.RuntimeCondition{Type: condType, Status: ok, Reason: reason, Message: message}
	conds := slices.Clone(r.conditions)
	for i := range conds {
		if conds[i].Type == condType {
			conds[i] = c
			r.conditions = conds
			return
		}
	}
	r.conditions = append(conds, c)
}

// newIDLocked returns a fresh 64-hex-digit ID, like a real runtime's and
// deterministic for a given sequence of creations.
func (r *Runtime) newIDLocked() string {
	r.seq++
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], r.seq)
	sum := sha256.Sum256(b[:])
	return hex.EncodeToString(sum[:])
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "runtimetest: %s %q not found", kind, id)
}

// Version implements runtime.RuntimeService.
func (r *Runtime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	if err := r.enter(ctx, "Version"); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       "runtimetest",
		RuntimeVersion:    "0.1.0",
		RuntimeApiVersion: "v1",
	}, nil
}

// Status implements runtime.RuntimeService: the conditions set with
// SetCondition.
func (r *Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	if err := r.enter(ctx, "Status"); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: slices.Clone(r.conditions)},
	}, nil
}

// shrinkLocked makes the maps and lists of sandboxes or containers anew
// once none is left, and the address pool once no sandbox is: a map gives
// back none of the room it grew to as it empties, nor a slice its
// capacity, and a churn of pods grows them to every object in flight at
// once, for as long as the runtime lives.
func (r *Runtime) shrinkLocked() {
	if len(r.containers) == 0 {
		r.containers = make(map[string]*container)
		r.containersByPod = make(map[string][]*container)
		r.ctrList, r.ctrGone = nil, 0
	}
	if len(r.sandboxes) == 0 {
		r.sandboxes = make(map[string]*sandbox)
		r.sandboxesByPod = make(map[string][]*sandbox)
		r.sandboxList, r.sandboxGone = nil, 0
		r.ips = ipPool{}
	}
}

// ipPool hands out addresses of 10.88.0.0/16, from 10.88.0.2, reusing
// released ones.
type ipPool struct {
	next uint32
	free []uint32
}

const ipPoolSize = 1 << 16

func (p *ipPool) get() (uint32, error) {
	if n := len(p.free); n > 0 {
		ip := p.free[n-1]
		p.free = p.free[:n-1]
		return ip, nil
	}
	if p.next == 0 {
		p.next = 2
	}
	if p.next >= ipPoolSize-1 {
		return 0, errors.New("runtimetest: no address left in 10.88.0.0/16")
	}
	ip := p.next
	p.next++
	return ip, nil
}

func (p *ipPool) put(ip uint32) {
	if ip != 0 {
		p.free = append(p.free, ip)
	}
}

func ipString(n uint32) string {
	return fmt.Sprintf("10.88.%d.%d", n>>8, n&0xff)
}

// cloneLabels copies a map from a caller's config; nil stays nil.
func cloneLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// matchLabels reports whether labels hold every pair of selector.
func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// podUIDLabel is the label the pod index is keyed on.
const podUIDLabel = runtime.LabelPodUID

// indexAdd appends x to the index entry of key (when non-empty).
func indexAdd[T comparable](index map[string][]T, key string, x T) {
	if key != "" {
		index[key] = append(index[key], x)
	}
}

// indexRemove removes x from the index entry of key.
func indexRemove[T comparable](index map[string][]T, key string, x T) {
	list := index[key]
	if i := slices.Index(list, x); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(index, key)
	} else {
		index[key] = list
	}
}
