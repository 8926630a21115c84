package podruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/atomicfile"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/credentials"
)

// EventFailedToRetrieveImagePullSecret (Warning, on the pod): some of the
// pod's imagePullSecrets could not be read; the pull goes on without
// them. The kubelet's event.
const EventFailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"

// puller coalesces image pulls: the pods that need an image at the same
// time share one PullImage call, and at most limit pulls of different
// images run at once (1: the kubelet's serialized pulls, its default).
//
// A shared pull goes on while any pod still waits for it: a pod whose sync
// is cancelled stops waiting without cancelling the pull for the others,
// and the pull is cancelled only when no pod waits any more.
type puller struct {
	is  runtime.ImageService
	sem chan struct{} // a token per running pull

	mu      sync.Mutex
	flights map[pullKey]*flight

	// records are the credentials each image was pulled with.
	records pullRecords
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

func newPuller(is runtime.ImageService, limit int) *puller {
	return &puller{is: is, sem: make(chan struct{}, max(limit, 1)), flights: map[pullKey]*flight{},
		records: pullRecords{byRef: map[string]*pullRecord{}, intents: map[string]int{}, interrupted: map[string]bool{}, now: time.Now}}
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

// pullWithCredentials pulls the image with each credential in turn until
// one succeeds, or without credentials when there are none, as the
// kubelet does; it returns the credential that worked (nil when none was
// sent) and records it for the image (pullRecords). When every attempt
// fails, the error joins theirs as the kubelet's aggregate does.
func (p *puller) pullWithCredentials(ctx context.Context, spec *runtimeapi.ImageSpec, creds []credentials.Credential, sandbox *runtimeapi.PodSandboxConfig) (string, *credentials.Credential, error) {
	image := spec.GetImage()
	p.records.intend(image, 1)
	defer p.records.intend(image, -1)
	if len(creds) == 0 {
		ref, err := p.pull(ctx, spec, nil, sandbox)
		if err == nil {
			p.records.pulled(image, ref, nil)
		}
		return ref, nil, err
	}
	var errs []error
	for i := range creds {
		ref, err := p.pull(ctx, spec, creds[i].AuthConfig(), sandbox)
		if err == nil {
			p.records.pulled(image, ref, &creds[i])
			return ref, &creds[i], nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return "", nil, utilerrors.NewAggregate(errs)
}

// imageCredentials returns the credentials of the pod's imagePullSecrets
// for image, then the node's, in the order to try them. A Secret it
// cannot read is named in a FailedToRetrieveImagePullSecret event and
// left out; a Secret whose docker config does not parse fails it (a
// *credentials.ConfigError).
func (m *Manager) imageCredentials(ctx context.Context, pod *v1.Pod, image string) ([]credentials.Credential, error) {
	var node []credentials.Credential
	if m.opts.NodeCredentials != nil {
		node = m.opts.NodeCredentials.Credentials(ctx, pod, image)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return node, nil
	}
	secrets, failed := credentials.PodSecrets(ctx, m.opts.Secrets, pod)
	if len(failed) > 0 {
		m.log.Info("unable to retrieve pull secrets, the image pull may not succeed", "pod", pod.Namespace+"/"+pod.Name, "secrets", failed)
		m.ev.pod(pod, v1.EventTypeWarning, EventFailedToRetrieveImagePullSecret,
			fmt.Sprintf("Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(failed, ", ")))
	}
	kr, err := credentials.NewKeyring(secrets)
	if err != nil {
		return nil, err
	}
	return append(kr.Lookup(image), node...), nil
}

// maxRecordedSecrets bounds the Secrets recorded for one image as found
// to match while checking access (the kubelet's
// writeRecordWhileMatchingLimit).
const maxRecordedSecrets = 100

// pullRecordsFile is where the pull records are kept under the agent's
// root directory (the kubelet keeps its own under
// <root>/image_manager/pulled).
const pullRecordsFile = "image_manager/pulled.json"

// pullRecordsDir is the directory of the pull records file, "" for
// none.
func pullRecordsDir(o Options) string {
	if o.NoPullRecordsFile {
		return ""
	}
	return o.RootDir
}

// persistIn keeps the pull records in a file of rootDir ("": memory
// only), read at their first use; it returns p.
func (p *puller) persistIn(rootDir string, log logr.Logger) *puller {
	if rootDir != "" {
		p.records.file = filepath.Join(rootDir, pullRecordsFile)
	}
	p.records.log = log
	return p
}

// pullRecords are the kubelet's image pull records
// (KubeletEnsureSecretPulledImages, on by default since 1.35, with its
// default policy NeverVerifyPreloadedImages): for each image the Manager
// pulled (by image ID), the credentials that pulled it, per repository,
// kept in <RootDir>/image_manager/pulled.json (in memory only without a
// RootDir). An image present on the node is used by a pod without a pull
// when the Manager did not pull it (preloaded), when it was pulled
// without credentials or with node-wide ones, or when one of the pod's
// pull Secrets is one that pulled it (same Secret, or same login);
// otherwise the pod's own credentials must pull it again.
type pullRecords struct {
	// file keeps the records across restarts ("": memory only).
	file string
	log  logr.Logger
	now  func() time.Time

	mu     sync.Mutex
	loaded bool
	byRef  map[string]*pullRecord
	// interrupted are the images whose pull was under way when the
	// records were last written (by an earlier run of the agent): until
	// the Manager pulls one again, it is not taken as preloaded.
	interrupted map[string]bool
	// intents counts the pulls under way per image as written: an image
	// present while the Manager pulls it counts as pulled by the Manager.
	intents map[string]int
	// repos holds the repository of each image name seen (repoOf), ""
	// for a name that does not parse: every container start asks, and a
	// node runs few images under many containers.
	repos map[string]string
}

// maxRepos bounds pullRecords.repos; past it the map starts over.
const maxRepos = 1024

// repoOf returns the repository of image (credentials.Repository),
// parsed once per name; false when it does not parse.
func (r *pullRecords) repoOf(image string) (string, bool) {
	r.mu.Lock()
	repo, ok := r.repos[image]
	r.mu.Unlock()
	if ok {
		return repo, repo != ""
	}
	repo, err := credentials.Repository(image)
	if err != nil {
		repo = ""
	}
	r.mu.Lock()
	if r.repos == nil || len(r.repos) >= maxRepos {
		r.repos = make(map[string]string)
	}
	r.repos[image] = repo
	r.mu.Unlock()
	return repo, repo != ""
}

// pullRecord is what pulled one image ID, per repository.
type pullRecord struct {
	repos map[string]*repoRecord
	// at is when the record was last written (zero: read from the file).
	at time.Time
}

type repoRecord struct {
	// nodeWide: pulled without credentials, any pod may use it.
	nodeWide bool
	secrets  []secretRecord
	// serviceAccounts pulled it with the logins a credential-provider
	// plugin gave for their tokens: their pods may use it.
	serviceAccounts []credentials.ServiceAccountRef
}

type secretRecord struct {
	ref  credentials.SecretRef
	hash string
}

// intend counts a pull of image starting (d = 1) or ended (d = -1). The
// images being pulled are written with the records, so that a pull a
// restart of the agent cuts short is known, as the kubelet's pull
// intents.
func (r *pullRecords) intend(image string, d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	before := r.intents[image]
	if r.intents[image] += d; r.intents[image] <= 0 {
		delete(r.intents, image)
	}
	switch after := r.intents[image]; {
	case before == 0 && after > 0:
		r.saveLocked()
	case before > 0 && after == 0:
		delete(r.interrupted, image)
		r.saveLocked()
	}
}

// prune forgets the records of image IDs absent from present, a list
// taken at listedAt; a record written since is kept (its image may have
// been pulled after the list).
func (r *pullRecords) prune(listedAt time.Time, present []string) {
	keep := make(map[string]bool, len(present))
	for _, id := range present {
		keep[id] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	changed := false
	for ref, rec := range r.byRef {
		if !keep[ref] && rec.at.Before(listedAt) {
			delete(r.byRef, ref)
			changed = true
		}
	}
	if changed {
		r.saveLocked()
	}
}

// pulled records that image, now image ID ref, was pulled with cred (nil:
// without credentials).
func (r *pullRecords) pulled(image, ref string, cred *credentials.Credential) {
	if ref == "" {
		return
	}
	repo, ok := r.repoOf(image)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	defer r.saveLocked()
	rec := r.byRef[ref]
	if rec == nil {
		rec = &pullRecord{repos: map[string]*repoRecord{}}
		r.byRef[ref] = rec
	}
	rec.at = time.Now()
	if r.now != nil {
		rec.at = r.now()
	}
	rr := rec.repos[repo]
	if rr == nil {
		rr = &repoRecord{}
		rec.repos[repo] = rr
	}
	switch {
	case cred != nil && cred.ServiceAccount != nil:
		rr.addServiceAccount(*cred.ServiceAccount)
	case cred == nil || cred.Source == nil:
		rr.nodeWide, rr.secrets, rr.serviceAccounts = true, nil, nil
	default:
		rr.add(secretRecord{ref: *cred.Source, hash: cred.Hash()})
	}
}

// The records as the file holds them.
type (
	recordsFile struct {
		// Images by image ID, then by repository.
		Images map[string]map[string]repoFile `json:"images"`
		// Pulling are the images being pulled when the file was written.
		Pulling []string `json:"pulling,omitempty"`
	}
	repoFile struct {
		NodeWide        bool                 `json:"nodeWide,omitempty"`
		Secrets         []secretFile         `json:"secrets,omitempty"`
		ServiceAccounts []serviceAccountFile `json:"serviceAccounts,omitempty"`
	}
	serviceAccountFile struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid,omitempty"`
	}
	secretFile struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid,omitempty"`
		// Hash is the login's SHA-256 (credentials.Credential.Hash).
		Hash string `json:"hash"`
	}
)

// loadLocked reads the records file once. An unreadable or malformed
// file is logged and the records start empty.
func (r *pullRecords) loadLocked() {
	if r.loaded || r.file == "" {
		return
	}
	r.loaded = true
	b, err := os.ReadFile(r.file)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var f recordsFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		r.log.Error(err, "cannot read the image pull records; starting without them", "path", r.file)
		return
	}
	for _, image := range f.Pulling {
		if r.interrupted == nil {
			r.interrupted = map[string]bool{}
		}
		r.interrupted[image] = true
	}
	for ref, repos := range f.Images {
		rec := &pullRecord{repos: map[string]*repoRecord{}}
		for repo, rf := range repos {
			rr := &repoRecord{nodeWide: rf.NodeWide}
			for _, s := range rf.Secrets {
				rr.secrets = append(rr.secrets, secretRecord{
					ref:  credentials.SecretRef{Namespace: s.Namespace, Name: s.Name, UID: types.UID(s.UID)},
					hash: s.Hash,
				})
			}
			for _, sa := range rf.ServiceAccounts {
				rr.serviceAccounts = append(rr.serviceAccounts, credentials.ServiceAccountRef{Namespace: sa.Namespace, Name: sa.Name, UID: types.UID(sa.UID)})
			}
			rec.repos[repo] = rr
		}
		r.byRef[ref] = rec
	}
}

// saveLocked writes the records file (a new file renamed over the old).
// A failure is logged: the records stay in memory.
func (r *pullRecords) saveLocked() {
	if r.file == "" {
		return
	}
	f := recordsFile{Images: map[string]map[string]repoFile{}}
	for image := range r.intents {
		f.Pulling = append(f.Pulling, image)
	}
	for image := range r.interrupted {
		if r.intents[image] == 0 {
			f.Pulling = append(f.Pulling, image)
		}
	}
	slices.Sort(f.Pulling)
	for ref, rec := range r.byRef {
		repos := map[string]repoFile{}
		for repo, rr := range rec.repos {
			rf := repoFile{NodeWide: rr.nodeWide}
			for _, s := range rr.secrets {
				rf.Secrets = append(rf.Secrets, secretFile{Namespace: s.ref.Namespace, Name: s.ref.Name, UID: string(s.ref.UID), Hash: s.hash})
			}
			for _, sa := range rr.serviceAccounts {
				rf.ServiceAccounts = append(rf.ServiceAccounts, serviceAccountFile{Namespace: sa.Namespace, Name: sa.Name, UID: string(sa.UID)})
			}
			repos[repo] = rf
		}
		f.Images[ref] = repos
	}
	b, err := json.Marshal(f)
	if err == nil {
		err = atomicfile.WriteFile(r.file, b, 0o700)
	}
	if err != nil {
		r.log.Error(err, "cannot write the image pull records", "path", r.file)
	}
}

// add records s, replacing the record of the same Secret.
func (rr *repoRecord) add(s secretRecord) {
	if rr.nodeWide {
		return
	}
	for i := range rr.secrets {
		if rr.secrets[i].ref == s.ref {
			rr.secrets[i] = s
			return
		}
	}
	if len(rr.secrets) < maxRecordedSecrets {
		rr.secrets = append(rr.secrets, s)
	}
}

// addServiceAccount records sa.
func (rr *repoRecord) addServiceAccount(sa credentials.ServiceAccountRef) {
	if rr.nodeWide || slices.Contains(rr.serviceAccounts, sa) {
		return
	}
	if len(rr.serviceAccounts) < maxRecordedSecrets {
		rr.serviceAccounts = append(rr.serviceAccounts, sa)
	}
}

// mustVerify tells whether a pod must pull image, present as image ID
// ref, with its own credentials (podCreds, called at most once) before
// using it. A matching Secret that the record does not hold yet (another
// Secret with the same login, or the same Secret with a new login) is
// added to it.
func (r *pullRecords) mustVerify(image, ref string, podCreds func() ([]credentials.Credential, error)) (bool, error) {
	repo, ok := r.repoOf(image)
	if !ok {
		return true, nil
	}
	r.mu.Lock()
	r.loadLocked()
	rec := r.byRef[ref]
	if rec == nil {
		// Not pulled by the Manager: preloaded, used as it is; unless a
		// pull of it is under way.
		pulling := r.intents[image] > 0 || r.interrupted[image]
		r.mu.Unlock()
		return pulling, nil
	}
	rr := rec.repos[repo]
	switch {
	case rr == nil:
		r.mu.Unlock()
		return true, nil
	case rr.nodeWide:
		r.mu.Unlock()
		return false, nil
	case len(rr.secrets) == 0 && len(rr.serviceAccounts) == 0:
		r.mu.Unlock()
		return true, nil
	}
	r.mu.Unlock()
	creds, err := podCreds()
	if err != nil {
		return true, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range creds {
		if c.ServiceAccount != nil && slices.Contains(rr.serviceAccounts, *c.ServiceAccount) {
			return false, nil
		}
		if c.Source == nil {
			continue
		}
		hash := c.Hash()
		for _, s := range rr.secrets {
			if s.hash == hash || s.ref == *c.Source {
				if s.hash != hash || s.ref != *c.Source {
					rr.add(secretRecord{ref: *c.Source, hash: hash})
					r.saveLocked()
				}
				return false, nil
			}
		}
	}
	return true, nil
}

// pullCredentialsFailed fails the image of container c, whose pod's
// credentials could not be read (a malformed docker config), as a failed
// pull: a Failed event naming the Secret, ErrImagePull, and the pull's
// back-off. The other pods are not concerned.
func (m *Manager) pullCredentialsFailed(pod *v1.Pod, c *v1.Container, err error) (string, string, error) {
	msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
	m.ev.container(pod, c, "", v1.EventTypeWarning, EventFailed, msg)
	m.mu.Lock()
	m.imageBO.next(pod.UID, c.Image, m.now(), false)
	m.mu.Unlock()
	return "", msg, fmt.Errorf("%w: %s", ErrImagePull, msg)
}
