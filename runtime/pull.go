package runtime

import (
	"context"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// puller coalesces image pulls: the pods that need an image at the same
// time share one PullImage call, and at most limit pulls of different
// images run at once (1: the kubelet's serialized pulls, its default).
//
// A shared pull goes on while any pod still waits for it: a pod whose sync
// is cancelled stops waiting without cancelling the pull for the others,
// and the pull is cancelled only when no pod waits any more.
type puller struct {
	is  ImageService
	sem chan struct{} // a token per running pull

	mu      sync.Mutex
	flights map[pullKey]*flight
}

// pullKey is what makes two pulls the same pull.
type pullKey struct {
	image, handler string
	// auth is the pull's credentials: pods with other credentials pull on
	// their own, so that none is served by a pull it was not allowed to
	// make.
	auth string
}

func newPullKey(spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig) pullKey {
	k := pullKey{image: spec.GetImage(), handler: spec.GetRuntimeHandler()}
	if auth != nil {
		k.auth = strings.Join([]string{auth.GetUsername(), auth.GetPassword(), auth.GetAuth(), auth.GetServerAddress(), auth.GetIdentityToken(), auth.GetRegistryToken()}, "\x00")
	}
	return k
}

// flight is one shared pull.
type flight struct {
	key     pullKey
	done    chan struct{} // closed when ref and err are set
	ref     string
	err     error
	waiters int
	cancel  context.CancelFunc
}

func newPuller(is ImageService, limit int) *puller {
	return &puller{is: is, sem: make(chan struct{}, max(limit, 1)), flights: map[pullKey]*flight{}}
}

// pull pulls the image, or waits for the pull of it already under way,
// and returns its result; or ctx's error when ctx ends first.
func (p *puller) pull(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	key := newPullKey(spec, auth)
	p.mu.Lock()
	f := p.flights[key]
	if f == nil {
		// The pull outlives the caller's cancellation while others wait:
		// it ends with the last waiter (leave).
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{key: key, done: make(chan struct{}), cancel: cancel}
		p.flights[key] = f
		go p.run(pctx, f, spec, auth, sandbox)
	}
	f.waiters++
	p.mu.Unlock()

	select {
	case <-f.done:
		p.leave(f)
		return f.ref, f.err
	case <-ctx.Done():
		p.leave(f)
		return "", ctx.Err()
	}
}

// run makes the pull once a token is free, and publishes its result.
func (p *puller) run(ctx context.Context, f *flight, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) {
	defer f.cancel()
	var ref string
	var err error
	select {
	case p.sem <- struct{}{}:
		ref, err = p.is.PullImage(ctx, spec, auth, sandbox)
		<-p.sem
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	// Pods that come from now on pull again: the image may be gone by
	// then, or the failure over.
	p.forgetLocked(f)
	f.ref, f.err = ref, err
	p.mu.Unlock()
	close(f.done)
}

// leave records that a waiter stopped waiting; the last one cancels the
// pull if it still runs, and the next pod to need the image pulls anew.
func (p *puller) leave(f *flight) {
	p.mu.Lock()
	f.waiters--
	last := f.waiters == 0
	if last {
		p.forgetLocked(f)
	}
	p.mu.Unlock()
	if last {
		f.cancel()
	}
}

// forgetLocked removes the flight from those new waiters join.
func (p *puller) forgetLocked(f *flight) {
	if p.flights[f.key] == f {
		delete(p.flights, f.key)
	}
}
