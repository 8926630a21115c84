package podruntime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	nkobjects "github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/runtime/credentials"
)

const privateImage = "private.test:5000/app:1"

// authImages is cri-api's fake image service in front of a registry that
// wants alice's login for the images of private.test:5000; it records
// each pull attempt ("image user", "-" without credentials).
type authImages struct {
	*critest.FakeImageService

	mu       sync.Mutex
	attempts []string
}

func (a *authImages) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	user := "-"
	if auth != nil {
		user = auth.GetUsername()
	}
	a.mu.Lock()
	a.attempts = append(a.attempts, spec.GetImage()+" "+user)
	a.mu.Unlock()
	if strings.HasPrefix(spec.GetImage(), "private.test:5000/") && (auth.GetUsername() != "alice" || auth.GetPassword() != "pw-alice") {
		return "", status.Errorf(codes.Unknown, "failed to pull and unpack image %q: failed to resolve reference %q: unexpected status from HEAD request: 401 Unauthorized", spec.GetImage(), spec.GetImage())
	}
	return a.FakeImageService.PullImage(ctx, spec, auth, sc)
}

func (a *authImages) takeAttempts() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.attempts
	a.attempts = nil
	return out
}

// secretStore holds Secrets of namespace default, as a getter.
type secretStore map[string]*v1.Secret

func (s secretStore) getter() nkobjects.SecretGetter {
	return nkobjects.SecretFunc(func(ctx context.Context, ns, name string) (*v1.Secret, error) {
		if sec, ok := s[name]; ok && ns == sec.Namespace {
			return sec, nil
		}
		return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
	})
}

func loginSecret(name, user, password string) *v1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"https://private.test:5000":{"auth":"` + auth + `"}}}`)},
	}
}

type pullFixture struct {
	*fakes
	images *authImages
	events *record.FakeRecorder
}

func newPullFixture(t *testing.T, secrets secretStore) *pullFixture {
	t.Helper()
	rec := record.NewFakeRecorder(1000)
	f := newFakes(t, Options{Secrets: secrets.getter(), Recorder: rec})
	ai := &authImages{FakeImageService: f.is}
	// The manager pulls through the registry fake.
	f.m.is = ai
	f.m.pulls = newPuller(ai, 1)
	return &pullFixture{fakes: f, images: ai, events: rec}
}

// privatePod is a pod of one container of privateImage with the given
// pull Secrets.
func privatePod(name string, policy v1.PullPolicy, secrets ...string) *v1.Pod {
	pod := testPod(name, "a")
	pod.Spec.Containers[0].Image = privateImage
	pod.Spec.Containers[0].ImagePullPolicy = policy
	for _, s := range secrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
	}
	return pod
}

// startErr is the start error of container a in the sync, nil when it
// started.
func startErr(t *testing.T, r SyncResult) *ActionResult {
	t.Helper()
	for i, a := range r.Results {
		if a.Action == ActionStartContainer && a.Target == "a" {
			if a.Err == nil {
				return nil
			}
			return &r.Results[i]
		}
	}
	t.Fatalf("no start of container a in %+v", r.Results)
	return nil
}

// TestPullSecretsTried: the pod's Secrets are read in its order, a
// missing one is named in an event, and each matching login is tried in
// turn until one pulls.
func TestPullSecretsTried(t *testing.T) {
	f := newPullFixture(t, secretStore{
		"bob":   loginSecret("bob", "bob", "pw-bob"),
		"alice": loginSecret("alice", "alice", "pw-alice"),
	})
	pod := privatePod("p", v1.PullIfNotPresent, "missing", "bob", "", "alice")
	if a := startErr(t, f.sync(t, pod)); a != nil {
		t.Fatalf("start failed: %v", a.Err)
	}
	if diff := cmp.Diff([]string{privateImage + " bob", privateImage + " alice"}, f.images.takeAttempts()); diff != "" {
		t.Errorf("pull attempts (-want +got):\n%s", diff)
	}
	ev := drain(f.events)
	want := "Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (missing); attempting to pull the image may not succeed."
	if !slices.Contains(ev, want) {
		t.Errorf("events %q lack %q", ev, want)
	}
	if !slices.Contains(ev, fmt.Sprintf("Normal Pulling Pulling image %q", privateImage)) {
		t.Errorf("events %q lack Pulling", ev)
	}
}

// TestPullSecretsUnauthorized: without a working login the pull fails with
// ErrImagePull and the registry's message, then backs off.
func TestPullSecretsUnauthorized(t *testing.T) {
	f := newPullFixture(t, secretStore{"bob": loginSecret("bob", "bob", "pw-bob")})
	for _, tc := range []struct {
		name    string
		secrets []string
		tried   []string
	}{
		{"no secret", nil, []string{privateImage + " -"}},
		{"wrong login", []string{"bob"}, []string{privateImage + " bob"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := privatePod("p-"+strings.ReplaceAll(tc.name, " ", "-"), v1.PullIfNotPresent, tc.secrets...)
			a := startErr(t, f.sync(t, pod))
			if a == nil || !errors.Is(a.Err, ErrImagePull) {
				t.Fatalf("start result %+v, want ErrImagePull", a)
			}
			if !strings.Contains(a.Message, "401 Unauthorized") || !strings.HasPrefix(a.Message, fmt.Sprintf("Failed to pull image %q: ", privateImage)) {
				t.Errorf("message %q lacks the registry's 401", a.Message)
			}
			if diff := cmp.Diff(tc.tried, f.images.takeAttempts()); diff != "" {
				t.Errorf("pull attempts (-want +got):\n%s", diff)
			}
			a = startErr(t, f.sync(t, pod))
			if a == nil || !errors.Is(a.Err, ErrImagePullBackOff) {
				t.Fatalf("second sync %+v, want ErrImagePullBackOff", a)
			}
		})
	}
}

// TestPullSecretsMalformed: a Secret whose docker config does not parse
// fails that pod's pull with a clear message; another pod pulls.
func TestPullSecretsMalformed(t *testing.T) {
	bad := loginSecret("bad", "x", "y")
	bad.Data[v1.DockerConfigJsonKey] = []byte(`{"auths":{"private.test:5000":{"auth":"not base64!"}}}`)
	f := newPullFixture(t, secretStore{"bad": bad, "alice": loginSecret("alice", "alice", "pw-alice")})
	a := startErr(t, f.sync(t, privatePod("p1", v1.PullIfNotPresent, "alice", "bad")))
	if a == nil || !errors.Is(a.Err, ErrImagePull) {
		t.Fatalf("start result %+v, want ErrImagePull", a)
	}
	if want := "image pull secret default/bad: malformed .dockerconfigjson: auth field: "; !strings.Contains(a.Message, want) {
		t.Errorf("message %q lacks %q", a.Message, want)
	}
	if got := f.images.takeAttempts(); len(got) != 0 {
		t.Errorf("pulls attempted with a malformed Secret: %q", got)
	}
	if !slices.ContainsFunc(drain(f.events), func(e string) bool {
		return strings.HasPrefix(e, "Warning Failed Failed to pull image") && strings.Contains(e, "default/bad")
	}) {
		t.Error("no Failed event names the malformed Secret")
	}
	if a := startErr(t, f.sync(t, privatePod("p2", v1.PullIfNotPresent, "alice"))); a != nil {
		t.Fatalf("another pod's start failed: %v", a.Err)
	}
}

// TestPullSecretsEnsurePulled: the kubelet's default image pull credential
// verification. An image pulled with a Secret is used without a pull only
// by pods holding that Secret or the same login; others pull it with their
// own credentials (and fail without). Preloaded images and images pulled
// without credentials are used by any pod.
func TestPullSecretsEnsurePulled(t *testing.T) {
	f := newPullFixture(t, secretStore{
		"alice":  loginSecret("alice", "alice", "pw-alice"),
		"alice2": loginSecret("alice2", "alice", "pw-alice"),
		"bob":    loginSecret("bob", "bob", "pw-bob"),
	})
	if a := startErr(t, f.sync(t, privatePod("a", v1.PullIfNotPresent, "alice"))); a != nil {
		t.Fatalf("start: %v", a.Err)
	}
	f.images.takeAttempts()
	drain(f.events)

	// The same Secret, another Secret with the same login: no pull.
	for _, p := range []*v1.Pod{privatePod("a-again", v1.PullIfNotPresent, "alice"), privatePod("a2", v1.PullNever, "alice2")} {
		if a := startErr(t, f.sync(t, p)); a != nil {
			t.Fatalf("%s: start: %v", p.Name, a.Err)
		}
	}
	if got := f.images.takeAttempts(); len(got) != 0 {
		t.Errorf("pulls %q, want none", got)
	}
	want := fmt.Sprintf("Normal Pulled Container image %q already present on machine and can be accessed by the pod", privateImage)
	if ev := drain(f.events); !slices.Contains(ev, want) {
		t.Errorf("events %q lack %q", ev, want)
	}

	// Without credentials: pulled again, refused by the registry.
	a := startErr(t, f.sync(t, privatePod("b", v1.PullIfNotPresent)))
	if a == nil || !errors.Is(a.Err, ErrImagePull) || !strings.Contains(a.Message, "401 Unauthorized") {
		t.Fatalf("pod without credentials: %+v, want ErrImagePull with a 401", a)
	}
	// Another login: pulled again, with it.
	a = startErr(t, f.sync(t, privatePod("c", v1.PullIfNotPresent, "bob")))
	if a == nil || !errors.Is(a.Err, ErrImagePull) {
		t.Fatalf("pod with bob's login: %+v, want ErrImagePull", a)
	}
	if diff := cmp.Diff([]string{privateImage + " -", privateImage + " bob"}, f.images.takeAttempts()); diff != "" {
		t.Errorf("pull attempts (-want +got):\n%s", diff)
	}
	// Pull policy Never: the image is as absent to the pod.
	a = startErr(t, f.sync(t, privatePod("d", v1.PullNever)))
	if a == nil || !errors.Is(a.Err, ErrImageNeverPull) || a.Message != fmt.Sprintf("Container image %q is not present with pull policy of Never", privateImage) {
		t.Fatalf("pod with policy Never: %+v, want ErrImageNeverPull", a)
	}

	// A preloaded image (busybox:1.36) and one pulled without credentials
	// serve every pod.
	public := testPod("pub", "a")
	public.Spec.Containers[0].Image = "public.test/app:1"
	if a := startErr(t, f.sync(t, public)); a != nil {
		t.Fatalf("public pull: %v", a.Err)
	}
	other := testPod("pub2", "a", "b")
	other.Spec.Containers[0].Image = "public.test/app:1"
	other.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "bob"}}
	if r := f.sync(t, other); r.Err() != nil {
		t.Fatalf("pod of public and preloaded images: %v", r.Err())
	}
	if diff := cmp.Diff([]string{"public.test/app:1 -"}, f.images.takeAttempts()); diff != "" {
		t.Errorf("pull attempts (-want +got):\n%s", diff)
	}
}

// TestPullRecordsSecretRotation: the Secret that pulled an image keeps
// access with a new login (same Secret: same namespace, name and UID); a
// Secret recreated under the same name with another login does not.
func TestPullRecordsSecretRotation(t *testing.T) {
	var r pullRecords
	r.byRef, r.intents = map[string]*pullRecord{}, map[string]int{}
	s := loginSecret("s", "alice", "pw-alice")
	pulledWith := credentialsOf(t, s)
	r.pulled(privateImage, "sha256:1", &pulledWith[0])
	rotated := loginSecret("s", "alice", "pw-new")
	recreated := loginSecret("s", "alice", "pw-other")
	recreated.UID = "other-uid"
	for _, tc := range []struct {
		name string
		sec  *v1.Secret
		want bool
	}{
		{"rotated", rotated, false},
		{"recreated", recreated, true},
	} {
		must, err := r.mustVerify(privateImage, "sha256:1", func() ([]credentials.Credential, error) { return credentialsOf(t, tc.sec), nil })
		if err != nil || must != tc.want {
			t.Errorf("%s: mustVerify = %v, %v; want %v", tc.name, must, err, tc.want)
		}
	}
	// Other tags of the repository share the record; another repository
	// holding the same image ID does not.
	if must, _ := r.mustVerify("private.test:5000/app:2", "sha256:1", noCredentials); !must {
		t.Error("another tag of the repository was not verified")
	}
	if must, _ := r.mustVerify("private.test:5000/other:1", "sha256:1", noCredentials); !must {
		t.Error("another repository of the image was not verified")
	}
	// An image not pulled by the Manager is preloaded: no verification;
	// unless a pull of it is under way.
	if must, _ := r.mustVerify("busybox:1.36", "sha256:2", noCredentials); must {
		t.Error("a preloaded image was verified")
	}
	r.intend("busybox:1.36", 1)
	if must, _ := r.mustVerify("busybox:1.36", "sha256:2", noCredentials); !must {
		t.Error("an image being pulled was not verified")
	}
	r.intend("busybox:1.36", -1)
	if len(r.intents) != 0 {
		t.Errorf("intents left: %v", r.intents)
	}
}

func noCredentials() ([]credentials.Credential, error) { return nil, nil }

func credentialsOf(t *testing.T, s *v1.Secret) []credentials.Credential {
	t.Helper()
	kr, err := credentials.NewKeyring([]v1.Secret{*s})
	if err != nil {
		t.Fatal(err)
	}
	return kr.Lookup(privateImage)
}

// TestPullNodeCredentials: node-wide logins are tried after the pod's,
// and an image pulled with one serves every pod without a pull.
func TestPullNodeCredentials(t *testing.T) {
	f := newPullFixture(t, secretStore{"bob": loginSecret("bob", "bob", "pw-bob")})
	node := &credentials.Keyring{}
	node.Add(nil, credentials.Config{"private.test:5000": {Username: "alice", Password: "pw-alice"}})
	f.m.opts.NodeCredentials = node
	if a := startErr(t, f.sync(t, privatePod("p", v1.PullIfNotPresent, "bob"))); a != nil {
		t.Fatalf("start: %v", a.Err)
	}
	if a := startErr(t, f.sync(t, privatePod("q", v1.PullNever))); a != nil {
		t.Fatalf("second pod: %v", a.Err)
	}
	if diff := cmp.Diff([]string{privateImage + " bob", privateImage + " alice"}, f.images.takeAttempts()); diff != "" {
		t.Errorf("pull attempts (-want +got):\n%s", diff)
	}
}

// TestPullRecordsPersist: the pull records survive a new Manager on the
// same root directory; a malformed records file is logged and ignored.
func TestPullRecordsPersist(t *testing.T) {
	dir := t.TempDir()
	p1 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	alice := credentialsOf(t, loginSecret("alice", "alice", "pw-alice"))
	p1.records.pulled(privateImage, "sha256:1", &alice[0])
	p1.records.pulled("public.test/x:1", "sha256:2", nil)

	p2 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	alice2 := func() ([]credentials.Credential, error) {
		return credentialsOf(t, loginSecret("alice2", "alice", "pw-alice")), nil
	}
	for _, tc := range []struct {
		image, ref string
		creds      func() ([]credentials.Credential, error)
		want       bool
	}{
		{privateImage, "sha256:1", noCredentials, true},
		{privateImage, "sha256:1", alice2, false},
		{"public.test/x:1", "sha256:2", noCredentials, false},
		{"busybox:1.36", "sha256:3", noCredentials, false},
	} {
		if must, err := p2.records.mustVerify(tc.image, tc.ref, tc.creds); err != nil || must != tc.want {
			t.Errorf("after a restart, mustVerify(%s, %s) = %v, %v; want %v", tc.image, tc.ref, must, err, tc.want)
		}
	}
	// alice2 was recorded as it matched: it is in the file too.
	p3 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	p3.records.mu.Lock()
	p3.records.loadLocked()
	n := len(p3.records.byRef["sha256:1"].repos["private.test:5000/app"].secrets)
	p3.records.mu.Unlock()
	if n != 2 {
		t.Errorf("%d Secrets recorded for the image, want 2 (alice, alice2)", n)
	}

	if err := os.WriteFile(filepath.Join(dir, pullRecordsFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	p4 := newPuller(nil, 1).persistIn(dir, log)
	if must, err := p4.records.mustVerify(privateImage, "sha256:1", noCredentials); err != nil || must {
		t.Errorf("with a malformed file, mustVerify = %v, %v; want false (no records)", must, err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "cannot read the image pull records") {
		t.Errorf("logged %q", logged)
	}
}

// With NoPullRecordsFile the records of a Manager with a RootDir stay in
// memory: they serve as before, and no file is written.
func TestPullRecordsNoFile(t *testing.T) {
	for _, noFile := range []bool{false, true} {
		dir := t.TempDir()
		p := newPuller(nil, 1).persistIn(pullRecordsDir(Options{RootDir: dir, NoPullRecordsFile: noFile}), logr.Discard())
		alice := credentialsOf(t, loginSecret("alice", "alice", "pw-alice"))
		p.records.pulled(privateImage, "sha256:1", &alice[0])
		if must, err := p.records.mustVerify(privateImage, "sha256:1", noCredentials); err != nil || !must {
			t.Errorf("NoPullRecordsFile=%v: mustVerify without credentials = %v, %v; want true (alice pulled it)", noFile, must, err)
		}
		_, err := os.Stat(filepath.Join(dir, pullRecordsFile))
		if written := err == nil; written == noFile {
			t.Errorf("NoPullRecordsFile=%v: records file written: %v (stat: %v)", noFile, written, err)
		}
	}
}

// TestPullRecordsServiceAccount: an image pulled with the login a
// credential-provider plugin gave for a service account's token serves the
// pods of that service account (same UID) without a pull, across a
// restart; another service account's pods must pull it with their own.
func TestPullRecordsServiceAccount(t *testing.T) {
	dir := t.TempDir()
	puller := credentials.ServiceAccountRef{Namespace: "ns", Name: "puller", UID: "sa-1"}
	viaSA := func(sa credentials.ServiceAccountRef) func() ([]credentials.Credential, error) {
		return func() ([]credentials.Credential, error) {
			return []credentials.Credential{{Username: "u", Password: "p", ServiceAccount: &sa}}, nil
		}
	}
	p1 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	p1.records.pulled(privateImage, "sha256:1", &credentials.Credential{Username: "u", Password: "p", ServiceAccount: &puller})

	p2 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	recreated := puller
	recreated.UID = "sa-2"
	for _, tc := range []struct {
		name  string
		creds func() ([]credentials.Credential, error)
		want  bool
	}{
		{"the same service account", viaSA(puller), false},
		{"no credentials", noCredentials, true},
		{"a service account of the same name, recreated", viaSA(recreated), true},
		{"another service account", viaSA(credentials.ServiceAccountRef{Namespace: "ns", Name: "other", UID: "sa-3"}), true},
	} {
		if must, err := p2.records.mustVerify(privateImage, "sha256:1", tc.creds); err != nil || must != tc.want {
			t.Errorf("%s: mustVerify = %v, %v; want %v", tc.name, must, err, tc.want)
		}
	}
	// Pulled later without credentials, the image is node-wide.
	p2.records.pulled(privateImage, "sha256:1", nil)
	if must, _ := p2.records.mustVerify(privateImage, "sha256:1", noCredentials); must {
		t.Error("an image pulled without credentials must still be verified")
	}
}

// TestPullRecordsInterruptedPull: a pull under way when the agent stopped
// is written with the records; after a restart, the image (present, but
// with no record) is not taken as preloaded until the Manager pulls it.
func TestPullRecordsInterruptedPull(t *testing.T) {
	dir := t.TempDir()
	p1 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	p1.records.intend(privateImage, 1) // the agent stops here

	p2 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	if must, err := p2.records.mustVerify(privateImage, "sha256:1", noCredentials); err != nil || !must {
		t.Errorf("after an interrupted pull, mustVerify = %v, %v; want true", must, err)
	}
	if must, _ := p2.records.mustVerify("public.test/x:1", "sha256:2", noCredentials); must {
		t.Error("another image, never pulled, must be verified")
	}
	p2.records.intend(privateImage, 1)
	p2.records.pulled(privateImage, "sha256:1", nil)
	p2.records.intend(privateImage, -1)

	p3 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	if must, _ := p3.records.mustVerify(privateImage, "sha256:1", noCredentials); must {
		t.Error("pulled again without credentials, the image must still be verified")
	}
	data, _ := os.ReadFile(filepath.Join(dir, pullRecordsFile))
	if strings.Contains(string(data), `"pulling"`) {
		t.Errorf("the records still name a pull under way: %s", data)
	}
}

// TestPullRecordsPrune: the records of images no longer present are
// dropped, but not one written after the images were listed.
func TestPullRecordsPrune(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p1 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	p1.records.now = func() time.Time { return now }
	alice := credentialsOf(t, loginSecret("alice", "alice", "pw-alice"))
	p1.records.pulled(privateImage, "sha256:gone", &alice[0])
	p1.records.pulled(privateImage, "sha256:kept", &alice[0])
	listedAt := now.Add(time.Second)
	now = now.Add(2 * time.Second)
	p1.records.pulled(privateImage, "sha256:new", &alice[0])
	p1.records.prune(listedAt, []string{"sha256:kept"})

	p2 := newPuller(nil, 1).persistIn(dir, logr.Discard())
	p2.records.mu.Lock()
	p2.records.loadLocked()
	var refs []string
	for ref := range p2.records.byRef {
		refs = append(refs, ref)
	}
	p2.records.mu.Unlock()
	sort.Strings(refs)
	if strings.Join(refs, ",") != "sha256:kept,sha256:new" {
		t.Errorf("records after pruning: %v, want kept and new", refs)
	}
	// Records read from the file are older than any list.
	p2.records.prune(now, nil)
	p2.records.mu.Lock()
	n := len(p2.records.byRef)
	p2.records.mu.Unlock()
	if n != 0 {
		t.Errorf("%d records left, want 0", n)
	}
}

// TestPullRecordsRepoOf: an image name is parsed once; a name that does
// not parse is verified every time, from the first; and the names kept
// are bounded.
func TestPullRecordsRepoOf(t *testing.T) {
	var r pullRecords
	r.byRef, r.intents = map[string]*pullRecord{}, map[string]int{}
	for range 2 {
		if repo, ok := r.repoOf("busybox:1.36"); !ok || repo != "docker.io/library/busybox" {
			t.Errorf("repoOf(busybox:1.36) = %q, %v", repo, ok)
		}
		// A bare image ID is not a name: a present image so named is
		// verified (pulled) as before.
		const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		if _, ok := r.repoOf(id); ok {
			t.Error("an image ID parsed as a name")
		}
		if must, _ := r.mustVerify(id, "sha256:3", noCredentials); !must {
			t.Error("an image whose name does not parse was not verified")
		}
	}
	for i := range maxRepos + 10 {
		r.repoOf(fmt.Sprintf("app-%d:1", i))
	}
	if len(r.repos) > maxRepos {
		t.Errorf("%d image names kept, want at most %d", len(r.repos), maxRepos)
	}
}

// BenchmarkMustVerifyPreloaded is a container start's check of a
// preloaded image.
func BenchmarkMustVerifyPreloaded(b *testing.B) {
	var r pullRecords
	r.byRef, r.intents = map[string]*pullRecord{}, map[string]int{}
	b.ReportAllocs()
	for b.Loop() {
		if must, _ := r.mustVerify("busybox:1.36", "sha256:2", noCredentials); must {
			b.Fatal("a preloaded image was verified")
		}
	}
}
