package projected_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	pt "github.com/nodekit/nodekit/volume/internal/projectiontest"
	"github.com/nodekit/nodekit/volume/projected"
	"github.com/nodekit/nodekit/volume/volumetest"
)

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }
func yes() *bool         { b := true; return &b }

// issuer is a fake TokenRequest API: each token is "token-<n>" and expires
// expirationSeconds after now.
type issuer struct {
	mu   sync.Mutex
	n    int
	reqs []string
	fail error
}

func (is *issuer) create(_ context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	ref := tr.Spec.BoundObjectRef
	is.reqs = append(is.reqs, fmt.Sprintf("%s/%s aud=%v exp=%d bound=%s/%s/%s/%s", ns, sa, tr.Spec.Audiences, *tr.Spec.ExpirationSeconds, ref.APIVersion, ref.Kind, ref.Name, ref.UID))
	if is.fail != nil {
		return nil, is.fail
	}
	is.n++
	out := tr.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{
		Token:               fmt.Sprintf("token-%d", is.n),
		ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second)),
	}
	return out, nil
}

func (is *issuer) requests() []string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return append([]string(nil), is.reqs...)
}

func (is *issuer) setFail(err error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.fail = err
}

// newClient is a fake clientset whose TokenRequest API is is.
func newClient(t *testing.T, is *issuer, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		sa := ca.(k8stesting.CreateActionImpl).Name
		tr, err := is.create(context.Background(), ca.GetNamespace(), sa, ca.GetObject().(*authenticationv1.TokenRequest))
		return true, tr, err
	})
	return client
}

func projVolume(defaultMode *int32, sources ...v1.VolumeProjection) v1.Volume {
	return v1.Volume{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: sources, DefaultMode: defaultMode}}}
}

func tokenSource(path, audience string, exp *int64) v1.VolumeProjection {
	return v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: path, Audience: audience, ExpirationSeconds: exp}}
}

func objects() []runtime.Object {
	return []runtime.Object{
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca"}, Data: map[string]string{"ca.crt": "CERT", "other": "x"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "creds"}, Data: map[string][]byte{"password": []byte("pw")}},
	}
}

// kubeAPIAccess is the volume the API server's ServiceAccount admission
// adds to every pod.
func kubeAPIAccess() v1.Volume {
	return projVolume(i32(0o644),
		tokenSource("token", "", i64(3607)),
		v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "ca"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	)
}

func TestSetUp(t *testing.T) {
	is := &issuer{}
	p, err := projected.NewForClient(clientset.From(newClient(t, is, objects()...)), projected.Options{NoTmpfs: true})
	if err != nil {
		t.Fatal(err)
	}
	vol := kubeAPIAccess()
	vol.Projected.Sources = append(vol.Projected.Sources,
		v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Items: []v1.KeyToPath{{Key: "password", Path: "db/password", Mode: i32(0o400)}}}},
		v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: yes()}},
		tokenSource("vault-token", "vault", nil),
	)
	pod := pt.Pod("web", vol)
	pod.Spec.ServiceAccountName = "builder"
	req := pt.Request(t, projected.PluginName, pod, &vol)
	m, err := p.SetUp(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if m != (volume.Mount{Name: "proj", HostPath: req.Dir, ReadOnly: true}) {
		t.Errorf("Mount = %+v", m)
	}
	want := map[string]string{
		"token":       "token-1 0644",
		"ca.crt":      "CERT 0644",
		"namespace":   "default 0644",
		"db/password": "pw 0400",
		"vault-token": "token-2 0644",
	}
	if diff := cmp.Diff(want, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	wantReqs := []string{
		"default/builder aud=[] exp=3607 bound=v1/Pod/web/uid-web",
		"default/builder aud=[vault] exp=3600 bound=v1/Pod/web/uid-web",
	}
	if diff := cmp.Diff(wantReqs, is.requests()); diff != "" {
		t.Errorf("token requests (-want +got):\n%s", diff)
	}

	// Again: the cached tokens, nothing written.
	first := pt.DataDir(t, req.Dir)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := len(is.requests()); n != 2 {
		t.Errorf("%d token requests after a second SetUp, want the 2 cached", n)
	}
	if got := pt.DataDir(t, req.Dir); got != first {
		t.Errorf("..data moved from %s to %s though nothing changed", first, got)
	}

	// After TearDown the tokens are forgotten.
	if err := p.TearDown(t.Context(), pt.TearDownRequest(req)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := len(is.requests()); n != 4 {
		t.Errorf("%d token requests after TearDown and SetUp, want 4", n)
	}
}

func TestDefaultServiceAccount(t *testing.T) {
	is := &issuer{}
	p, err := projected.New(projected.Funcs{TokenFunc: is.create}, projected.Options{NoTmpfs: true})
	if err != nil {
		t.Fatal(err)
	}
	vol := projVolume(nil, tokenSource("token", "", nil))
	req := pt.Request(t, projected.PluginName, pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/default aud=[] exp=3600 bound=v1/Pod/web/uid-web"}, is.requests()); diff != "" {
		t.Errorf("token requests (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	is := &issuer{}
	p, err := projected.NewForClient(clientset.From(newClient(t, is, objects()...)), projected.Options{NoTmpfs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		vol     v1.Volume
		want    []string
		invalid bool
	}{
		{
			name: "missing objects, each named",
			vol: projVolume(nil,
				v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "nocm"}}},
				v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "nosecret"}}},
			),
			want: []string{`projected: volume proj: sources[0]: getting configMap default/nocm: configmaps "nocm" not found`, `sources[1]: getting secret default/nosecret: secrets "nosecret" not found`},
		},
		{
			name: "missing key",
			vol:  projVolume(nil, v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "ca"}, Items: []v1.KeyToPath{{Key: "nope", Path: "x"}}}}),
			want: []string{`configMap default/ca has no key "nope"`},
		},
		{name: "cluster trust bundle", vol: projVolume(nil, v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}}), want: []string{"clusterTrustBundle sources are not supported"}, invalid: true},
		{name: "token path", vol: projVolume(nil, tokenSource("../token", "", nil)), want: []string{"must not contain '..'"}, invalid: true},
		{name: "empty source", vol: projVolume(nil, v1.VolumeProjection{}), want: []string{"no source set"}, invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := pt.Request(t, projected.PluginName, pt.Pod("web", tc.vol), &tc.vol)
			_, err := p.SetUp(t.Context(), req)
			if err == nil {
				t.Fatal("SetUp succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q does not say %q", err, w)
				}
			}
			if volume.IsPermanent(err) != tc.invalid {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, volume.IsPermanent(err), tc.invalid)
			}
		})
	}
}

// TestTokenRefresh follows a 10 minute token: the same token until 80% of
// its lifetime, a new one after, swapped in with ..data.
func TestTokenRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := &issuer{}
		p, err := projected.New(projected.Funcs{TokenFunc: is.create}, projected.Options{NoTmpfs: true})
		if err != nil {
			t.Fatal(err)
		}
		vol := projVolume(nil, tokenSource("token", "api", i64(600)))
		req := pt.Request(t, projected.PluginName, pt.Pod("web", vol), &vol)
		start := time.Now()
		token := func() string {
			t.Helper()
			if _, err := p.SetUp(t.Context(), req); err != nil {
				t.Fatalf("SetUp at %v: %v", time.Since(start), err)
			}
			b, err := os.ReadFile(filepath.Join(req.Dir, "token"))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		sleepUntil := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

		if got := token(); got != "token-1" {
			t.Fatalf("first token %q", got)
		}
		data := pt.DataDir(t, req.Dir)
		// 80% of 600s is 480s; the jitter brings it forward by less than 10s.
		sleepUntil(469 * time.Second)
		if got := token(); got != "token-1" {
			t.Errorf("at 469s the token is %q, want the first one still", got)
		}
		if got := pt.DataDir(t, req.Dir); got != data {
			t.Error("..data moved though the token was not refreshed")
		}
		sleepUntil(481 * time.Second)
		if got := token(); got != "token-2" {
			t.Errorf("at 481s the token is %q, want a new one", got)
		}
		if got := pt.DataDir(t, req.Dir); got == data {
			t.Error("..data did not move with the new token")
		}
		if n := len(is.requests()); n != 2 {
			t.Errorf("%d token requests, want 2", n)
		}

		// The API server fails: the current token is kept until it
		// expires...
		is.setFail(apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "default"))
		sleepUntil(481*time.Second + 481*time.Second)
		if got := token(); got != "token-2" {
			t.Errorf("with refreshes failing the token is %q, want the current one", got)
		}
		// ...and then SetUp fails, naming the service account.
		sleepUntil(481*time.Second + 601*time.Second)
		_, err = p.SetUp(t.Context(), req)
		if err == nil || !strings.Contains(err.Error(), "service account default/default") {
			t.Errorf("SetUp after the token expired: %v, want an error naming the service account", err)
		}
	})
}

func TestTokenOwner(t *testing.T) {
	pt.RequireRoot(t)
	for _, tc := range []struct {
		name    string
		sc      *v1.PodSecurityContext
		mode    os.FileMode
		uid     uint32
		gid     uint32
		setsGid bool
	}{
		{name: "no user", mode: 0o644},
		{name: "the pod's user", sc: &v1.PodSecurityContext{RunAsUser: i64(1234)}, mode: 0o600, uid: 1234},
		{name: "fsGroup", sc: &v1.PodSecurityContext{FSGroup: i64(4321)}, mode: 0o640, gid: 4321, setsGid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := &issuer{}
			p, err := projected.New(projected.Funcs{TokenFunc: is.create}, projected.Options{})
			if err != nil {
				t.Fatal(err)
			}
			vol := projVolume(nil, tokenSource("token", "", nil))
			pod := pt.Pod("web", vol)
			pod.Spec.SecurityContext = tc.sc
			req := pt.Request(t, projected.PluginName, pod, &vol)
			t.Cleanup(func() { _ = p.TearDown(context.WithoutCancel(t.Context()), pt.TearDownRequest(req)) })
			if _, err := p.SetUp(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			if typ := pt.MountType(t, req.Dir); typ != "tmpfs" {
				t.Errorf("the volume is on %q, want a tmpfs", typ)
			}
			fi, err := os.Stat(filepath.Join(req.Dir, "token"))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != tc.mode || st.Uid != tc.uid || (tc.setsGid && st.Gid != tc.gid) {
				t.Errorf("token mode %v uid %d gid %d; want %v uid %d gid %d", fi.Mode().Perm(), st.Uid, st.Gid, tc.mode, tc.uid, tc.gid)
			}
		})
	}
}

func TestKeepsContentWhileAPIServerIsAway(t *testing.T) {
	is := &issuer{}
	p, err := projected.NewForClient(clientset.From(newClient(t, is, objects()...)), projected.Options{NoTmpfs: true})
	if err != nil {
		t.Fatal(err)
	}
	vol := kubeAPIAccess()
	req := pt.Request(t, projected.PluginName, pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	before := pt.Files(t, req.Dir)
	// A restarted agent: no cached token, the API server unreachable.
	p2, err := projected.New(projected.Funcs{
		ConfigMapFunc: func(context.Context, string, string) (*v1.ConfigMap, error) {
			return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		},
		TokenFunc: func(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return nil, apierrors.NewServiceUnavailable("down")
		},
	}, projected.Options{NoTmpfs: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.SetUp(t.Context(), req); err != nil {
		t.Fatalf("SetUp of a volume with content while the API server is away: %v", err)
	}
	if diff := cmp.Diff(before, pt.Files(t, req.Dir)); diff != "" {
		t.Errorf("content changed (-before +after):\n%s", diff)
	}
}

func TestNew(t *testing.T) {
	if _, err := projected.New(nil, projected.Options{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := projected.NewForClient(nil, projected.Options{}); err == nil {
		t.Error("NewForClient(nil) succeeded")
	}
	var f projected.Funcs
	if _, err := f.GetSecret(t.Context(), "a", "b"); err == nil {
		t.Error("Funcs without SecretFunc got a secret")
	}
}

func TestPluginSuite(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		objs := objects()
		for _, o := range objs {
			o.(metav1.Object).SetNamespace("volumetest")
		}
		p, err := projected.NewForClient(clientset.From(newClient(t, &issuer{}, objs...)), projected.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return volumetest.Fixture{
			Plugin:      p,
			Volumes:     []v1.Volume{kubeAPIAccess()},
			Unsupported: []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}}},
		}
	})
}

func TestNoGoroutines(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	is := &issuer{}
	p, err := projected.New(projected.Funcs{TokenFunc: is.create}, projected.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vol := projVolume(nil, tokenSource("token", "", nil))
	req := pt.Request(t, projected.PluginName, pt.Pod("web", vol), &vol)
	if _, err := p.SetUp(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if err := p.TearDown(t.Context(), pt.TearDownRequest(req)); err != nil {
		t.Fatal(err)
	}
}
