package node

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeLeases is a LeaseInterface holding one Lease, recording each call's
// verb and time; fail, when set, answers a call instead.
type fakeLeases struct {
	mu    sync.Mutex
	lease *coordinationv1.Lease
	rv    int
	calls []leaseCall
	fail  func(verb string) error
	// hang, when set and true for a call, makes the call wait for its
	// context to end, as a request on a connection that hangs.
	hang func(verb string) bool
	// sentManaged counts the updates that sent managedFields; the Leases
	// the fake returns carry them, as the API server's.
	sentManaged int
}

// served is the Lease held as the API server returns it: with
// managedFields.
func (f *fakeLeases) served() *coordinationv1.Lease {
	l := f.lease.DeepCopy()
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "nodekit", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "coordination.k8s.io/v1"}}
	return l
}

type leaseCall struct {
	verb string
	at   time.Time
}

func (f *fakeLeases) record(verb string) error {
	f.calls = append(f.calls, leaseCall{verb, time.Now()})
	if f.fail != nil {
		return f.fail(verb)
	}
	return nil
}

var leasesGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (f *fakeLeases) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("get"); err != nil {
		return nil, err
	}
	if f.lease == nil {
		return nil, apierrors.NewNotFound(leasesGR, name)
	}
	return f.served(), nil
}

func (f *fakeLeases) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("create"); err != nil {
		return nil, err
	}
	if f.lease != nil {
		return nil, apierrors.NewAlreadyExists(leasesGR, l.Name)
	}
	f.rv++
	f.lease = l.DeepCopy()
	f.lease.ResourceVersion = strconv.Itoa(f.rv)
	return f.served(), nil
}

func (f *fakeLeases) Update(ctx context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	if f.hang != nil && f.hang("update") {
		f.calls = append(f.calls, leaseCall{"update", time.Now()})
		f.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer f.mu.Unlock()
	if err := f.record("update"); err != nil {
		return nil, err
	}
	if f.lease == nil {
		return nil, apierrors.NewNotFound(leasesGR, l.Name)
	}
	if l.ResourceVersion != f.lease.ResourceVersion {
		return nil, apierrors.NewConflict(leasesGR, l.Name, errors.New("the object has been modified"))
	}
	if l.ManagedFields != nil {
		f.sentManaged++
	}
	f.rv++
	f.lease = l.DeepCopy()
	f.lease.ResourceVersion = strconv.Itoa(f.rv)
	return f.served(), nil
}

func (f *fakeLeases) verbs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v []string
	for _, c := range f.calls {
		v = append(v, c.verb)
	}
	return v
}

func (f *fakeLeases) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

func newLeaseLoop(t *testing.T, f *fakeLeases) *leaseLoop {
	return &leaseLoop{
		client: f, name: "n1", namespace: LeaseNamespace, holder: "n1",
		durationSeconds: 40, interval: 10 * time.Second, log: testr.New(t),
	}
}

// runLoop runs l until the returned stop is called, which waits for run
// to return.
func runLoop(t *testing.T, l *leaseLoop) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); l.run(ctx) }()
	return func() { cancel(); <-done }
}

// The Lease is created once, then renewed from the Lease last written: an
// update every interval (10 s, up to 4 % later) and no read.
func TestLeaseLoopRenewsFromTheCachedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLeases{}
		l := newLeaseLoop(t, f)
		stop := runLoop(t, l)
		synctest.Wait()
		if got := f.verbs(); !slices.Equal(got, []string{"get", "create"}) {
			t.Fatalf("first sync: %v, want get, create", got)
		}
		if d := *f.lease.Spec.LeaseDurationSeconds; d != 40 || *f.lease.Spec.HolderIdentity != "n1" || f.lease.Namespace != LeaseNamespace {
			t.Errorf("lease spec %+v in %q", f.lease.Spec, f.lease.Namespace)
		}
		f.reset()
		start := time.Now()
		time.Sleep(105 * time.Second) // 10 renewals at 10-10.4 s
		synctest.Wait()
		stop()
		calls := f.calls
		if len(calls) < 10 || len(calls) > 11 {
			t.Fatalf("%d calls in 105 s, want 10 or 11 updates: %v", len(calls), f.verbs())
		}
		prev := start
		for i, c := range calls {
			if c.verb != "update" {
				t.Errorf("call %d is a %s, want update", i, c.verb)
			}
			if d := c.at.Sub(prev); i > 0 && (d < 10*time.Second || d > 10400*time.Millisecond) {
				t.Errorf("renewal %d after %v, want 10 s to 10.4 s", i, d)
			}
			prev = c.at
		}
		if got := f.lease.Spec.RenewTime.Time; !got.Equal(calls[len(calls)-1].at) {
			t.Errorf("renew time %v, want the last update's %v", got, calls[len(calls)-1].at)
		}
		// The API server keeps the managedFields of an update that
		// leaves them out: sending them back costs every renewal their
		// copy and encoding for nothing.
		if f.sentManaged != 0 {
			t.Errorf("%d of %d renewals sent the Lease's managedFields, want none", f.sentManaged, len(calls))
		}
	})
}

// A failing read backs off 0.2 s, doubling, capped at 7 s.
func TestLeaseLoopBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLeases{fail: func(string) error { return apierrors.NewServiceUnavailable("down") }}
		stop := runLoop(t, newLeaseLoop(t, f))
		time.Sleep(60 * time.Second)
		synctest.Wait()
		stop()
		want := []time.Duration{200, 400, 800, 1600, 3200, 6400, 7000, 7000, 7000}
		for i, w := range want {
			if i+1 >= len(f.calls) {
				t.Fatalf("%d calls, want more than %d", len(f.calls), len(want))
			}
			if d := f.calls[i+1].at.Sub(f.calls[i].at); d != w*time.Millisecond {
				t.Errorf("wait %d: %v, want %v", i, d, w*time.Millisecond)
			}
		}
	})
}

// An owner that cannot be set yet (the Node is not registered) blocks the
// create, not the loop: the next interval creates the Lease.
func TestLeaseLoopWaitsForTheOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLeases{}
		l := newLeaseLoop(t, f)
		var mu sync.Mutex
		registered := false
		l.postProcess = func(lease *coordinationv1.Lease) error {
			mu.Lock()
			defer mu.Unlock()
			if !registered {
				return errors.New("not registered")
			}
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1"}}
			return nil
		}
		stop := runLoop(t, l)
		defer stop()
		synctest.Wait()
		if got := f.verbs(); !slices.Equal(got, []string{"get"}) {
			t.Fatalf("calls %v before registration, want one get", got)
		}
		mu.Lock()
		registered = true
		mu.Unlock()
		time.Sleep(10500 * time.Millisecond)
		synctest.Wait()
		if got := f.verbs(); !slices.Equal(got, []string{"get", "get", "create"}) {
			t.Fatalf("calls %v, want get, get, create", got)
		}
		if refs := f.lease.OwnerReferences; len(refs) != 1 || refs[0].UID != "u1" {
			t.Errorf("owners %v, want the node", refs)
		}
	})
}

// A conflict reads the Lease again and updates that; updates failing
// five times in a row call onRepeatedFailure on all but the first, and the
// next interval reads the Lease again.
func TestLeaseLoopConflictAndRepeatedFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLeases{}
		l := newLeaseLoop(t, f)
		var hooks int
		l.onRepeatedFailure = func() { hooks++ }
		stop := runLoop(t, l)
		defer stop()
		synctest.Wait()

		// Another writer: the cached Lease is stale.
		f.mu.Lock()
		f.rv++
		f.lease.ResourceVersion = "x"
		f.calls = nil
		f.mu.Unlock()
		time.Sleep(10500 * time.Millisecond)
		synctest.Wait()
		if got := f.verbs(); !slices.Equal(got, []string{"update", "get", "update"}) {
			t.Errorf("after a conflict: %v, want update, get, update", got)
		}
		if hooks != 0 {
			t.Errorf("onRepeatedFailure called %d times after one conflict", hooks)
		}

		f.mu.Lock()
		f.calls = nil
		f.fail = func(verb string) error {
			if verb == "update" {
				return apierrors.NewServiceUnavailable("down")
			}
			return nil
		}
		f.mu.Unlock()
		time.Sleep(10500 * time.Millisecond)
		synctest.Wait()
		want := []string{"update", "update", "update", "update", "update", "get", "update", "update", "update", "update", "update"}
		if got := f.verbs(); !slices.Equal(got, want) {
			t.Errorf("updates failing: %v, want %v", got, want)
		}
		if hooks != 8 {
			t.Errorf("onRepeatedFailure called %d times, want 8 (4 per 5 failed updates)", hooks)
		}
	})
}

// A renewal that hangs is given up after the renew interval, as the
// kubelet's heartbeat client's timeout does, and tried again at once, so
// that the Lease is renewed before it expires (40 s).
func TestLeaseLoopRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLeases{}
		l := newLeaseLoop(t, f)
		stop := runLoop(t, l)
		defer stop()
		synctest.Wait()
		f.mu.Lock()
		hung := 0
		f.hang = func(verb string) bool { hung++; return hung == 1 }
		f.calls = nil
		f.mu.Unlock()
		time.Sleep(25 * time.Second)
		synctest.Wait()
		f.mu.Lock()
		calls := slices.Clone(f.calls)
		f.mu.Unlock()
		if len(calls) < 2 || calls[0].verb != "update" || calls[1].verb != "update" {
			t.Fatalf("calls %v, want a hung update, then another", calls)
		}
		if d := calls[1].at.Sub(calls[0].at); d != 10*time.Second {
			t.Errorf("the hung update was given up after %v, want the renew interval, 10 s", d)
		}
		if got := f.lease.Spec.RenewTime.Time; !got.Equal(calls[1].at) {
			t.Errorf("renew time %v, want the second update's %v", got, calls[1].at)
		}
	})
}
