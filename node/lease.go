package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kubeclient"
)

const (
	// leaseUpdateRetries is how many times in a row a renewal is tried
	// before the loop waits for the next interval (component-helpers'
	// maxUpdateRetries).
	leaseUpdateRetries = 5
	// leaseBackoffInit and leaseBackoffMax bound the wait between two
	// failed attempts to read or create the Lease: 0.2 s doubling to 7 s.
	leaseBackoffInit = 200 * time.Millisecond
	leaseBackoffMax  = 7 * time.Second
	// leaseJitter is the renew interval's jitter factor.
	leaseJitter = 0.04
)

// leaseLoop renews the node's Lease with the semantics of
// component-helpers' lease controller (k8s.io/component-helpers/
// apimachinery/lease), which the kubelet uses: every renew interval
// (jittered by up to 4 %, counted from the end of the previous renewal), it
// updates the Lease it last wrote (no GET); when that fails it reads the
// Lease, creating it when missing, with back-off, and updates that. A
// conflict reads the Lease again; after every failed attempt but the
// first, onRepeatedFailure is called. newLease's postProcess (the owner
// reference) failing blocks a create, and skips the update of that try, as
// the controller's does. Each request is bounded by requestContext.
type leaseLoop struct {
	client            kubeclient.LeaseInterface
	name, namespace   string
	holder            string
	durationSeconds   int32
	interval          time.Duration
	onRepeatedFailure func()
	postProcess       func(*coordinationv1.Lease) error
	log               logr.Logger

	// latest is the Lease as last created or updated.
	latest *coordinationv1.Lease
}

// run renews the Lease until ctx ends.
func (l *leaseLoop) run(ctx context.Context) {
	for {
		t := time.NewTimer(l.tick(ctx))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// tick is one renewal; it returns when the next is due: the interval,
// jittered.
func (l *leaseLoop) tick(ctx context.Context) time.Duration {
	l.sync(ctx)
	return time.Duration(float64(l.interval) * (1 + leaseJitter*rand.Float64()))
}

// sync is one renewal.
func (l *leaseLoop) sync(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	if l.latest != nil {
		err := l.retryUpdate(ctx, l.latest)
		if err == nil {
			return
		}
		l.log.Info("updating the lease from the one last written failed: reading it again", "err", err.Error())
	}
	lease, created := l.backoffEnsure(ctx)
	l.latest = withoutManagedFields(lease)
	if !created && lease != nil {
		if err := l.retryUpdate(ctx, lease); err != nil {
			l.log.Error(err, "updating the lease failed: retrying at the next interval", "interval", l.interval)
		}
	}
}

// backoffEnsure reads the Lease, creating it when missing, until it
// succeeds or ctx ends, waiting 0.2 s doubling to 7 s between attempts. It
// returns the Lease and whether it created it; nil when ctx ended or the
// Lease could not be made yet (postProcess failed).
func (l *leaseLoop) backoffEnsure(ctx context.Context) (*coordinationv1.Lease, bool) {
	sleep := leaseBackoffInit / 2
	for {
		lease, created, err := l.ensure(ctx)
		if err == nil {
			return lease, created
		}
		sleep = min(2*sleep, leaseBackoffMax)
		if ctx.Err() == nil {
			l.log.Error(err, "reading or creating the lease failed: retrying", "backoff", sleep)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false
		case <-t.C:
		}
	}
}

// requestContext bounds one request to the API server by the renew
// interval (and the Lease's duration, when shorter), as the kubelet's
// heartbeat client's timeout does (cmd/kubelet/app/server.go), so that a
// connection that hangs does not hold a renewal past the Lease's expiry.
func (l *leaseLoop) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := l.interval
	if d := time.Duration(l.durationSeconds) * time.Second; d > 0 && d < timeout {
		timeout = d
	}
	return context.WithTimeout(ctx, timeout)
}

// ensure reads the Lease, creating it when missing.
func (l *leaseLoop) ensure(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	rctx, cancel := l.requestContext(ctx)
	lease, err := l.client.Get(rctx, l.name, metav1.GetOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		want, err := l.newLease(nil)
		if err != nil {
			// Not created this time (the Node is not registered yet):
			// the next interval tries again.
			l.log.V(4).Info("not creating the lease yet", "reason", err.Error())
			return nil, false, nil
		}
		rctx, cancel := l.requestContext(ctx)
		lease, err := l.client.Create(rctx, want, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return nil, false, err
		}
		return lease, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return lease, false, nil
}

// retryUpdate renews base, trying up to leaseUpdateRetries times.
func (l *leaseLoop) retryUpdate(ctx context.Context, base *coordinationv1.Lease) error {
	for i := range leaseUpdateRetries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		want, err := l.newLease(base)
		if err != nil {
			l.log.Error(err, "preparing the lease failed")
		} else {
			rctx, cancel := l.requestContext(ctx)
			lease, err := l.client.Update(rctx, want, metav1.UpdateOptions{})
			cancel()
			if err == nil {
				l.latest = withoutManagedFields(lease)
				return nil
			}
			if ctx.Err() == nil {
				l.log.Error(err, "updating the lease failed")
			}
			if apierrors.IsConflict(err) {
				base, _ = l.backoffEnsure(ctx)
				continue
			}
		}
		if i > 0 && l.onRepeatedFailure != nil {
			l.onRepeatedFailure()
		}
	}
	return fmt.Errorf("node: %d attempts to update the lease failed", leaseUpdateRetries)
}

// withoutManagedFields returns lease, which the caller owns, without its
// managedFields: the next renewal copies it, and an update that leaves
// them out has the API server keep them, so that sending them back would
// only cost each renewal their copy and encoding.
func withoutManagedFields(lease *coordinationv1.Lease) *coordinationv1.Lease {
	if lease != nil {
		lease.ManagedFields = nil
	}
	return lease
}

// newLease returns a new Lease when base is nil, else a copy of base, with
// the duration and renew time set and postProcess applied.
func (l *leaseLoop) newLease(base *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	var lease *coordinationv1.Lease
	if base == nil {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.holder)},
		}
	} else {
		lease = base.DeepCopy()
	}
	lease.Spec.LeaseDurationSeconds = ptr.To(l.durationSeconds)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if l.postProcess != nil {
		return lease, l.postProcess(lease)
	}
	return lease, nil
}
