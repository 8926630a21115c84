package integration

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/configmap"
	"github.com/nodekit/nodekit/volume/downwardapi"
	"github.com/nodekit/nodekit/volume/projected"
	"github.com/nodekit/nodekit/volume/secret"
)

// volumeFixture lays out one volume of a pod as the volume manager does,
// and sets it up again on demand, as a manager refreshing the volumes of
// plugins with RequiresRefresh does.
type volumeFixture struct {
	t      *testing.T
	plugin volume.Plugin
	req    volume.SetUpRequest
}

func newVolumeFixture(t *testing.T, p volume.Plugin, pod *v1.Pod, vol v1.Volume) *volumeFixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := volume.PodDirs{Root: root}.Volume(pod.UID, p.Name(), vol.Name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		t.Fatal(err)
	}
	f := &volumeFixture{t: t, plugin: p, req: volume.SetUpRequest{Pod: pod, Volume: &vol, Dir: dir}}
	t.Cleanup(func() {
		err := p.TearDown(context.Background(), volume.TearDownRequest{PodUID: pod.UID, Name: vol.Name, Dir: dir})
		if err != nil {
			t.Errorf("TearDown: %v", err)
		}
	})
	return f
}

func (f *volumeFixture) setUp() volume.Mount {
	f.t.Helper()
	m, err := f.plugin.SetUp(f.t.Context(), f.req)
	if err != nil {
		f.t.Fatalf("SetUp: %v", err)
	}
	return m
}

func (f *volumeFixture) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.req.Dir, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// data is where ..data points.
func (f *volumeFixture) data() string {
	f.t.Helper()
	target, err := os.Readlink(filepath.Join(f.req.Dir, "..data"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.t.Fatal(err)
	}
	return target
}

// mountType is the file system type mounted on the volume's directory, ""
// when none.
func (f *volumeFixture) mountType() string {
	f.t.Helper()
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer mi.Close()
	typ := ""
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == f.req.Dir {
			for i, x := range fields {
				if x == "-" && i+1 < len(fields) {
					typ = fields[i+1]
				}
			}
		}
	}
	return typ
}

// localPod is a pod of the agent's, with a UID, mounting vol.
func localPod(name string, vol v1.Volume) *v1.Pod {
	pod := newPod(name, "volumes-node")
	pod.UID = types.UID("uid-" + name)
	pod.Spec.Volumes = []v1.Volume{vol}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: vol.Name, MountPath: "/mnt"}}
	return pod
}

func TestSecretVolume(t *testing.T) {
	c := client(t)
	name := uniqueName("vol-secret")
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}, Data: map[string][]byte{"password": []byte("one")}}
	if _, err := c.CoreV1().Secrets(s.Namespace).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Secrets(s.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{}) })

	p, err := secret.NewForClient(clientset.From(c), secret.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vol := v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: name}}}
	f := newVolumeFixture(t, p, localPod(name, vol), vol)
	if m := f.setUp(); !m.ReadOnly || m.HostPath != f.req.Dir {
		t.Errorf("Mount = %+v", m)
	}
	if got := f.read("password"); got != "one" {
		t.Errorf("password = %q, want the secret's", got)
	}
	if os.Geteuid() == 0 {
		if typ := f.mountType(); typ != "tmpfs" {
			t.Errorf("the secret volume is on %q, want a tmpfs", typ)
		}
	}
	before := f.data()

	s.Data["password"] = []byte("two")
	if _, err := c.CoreV1().Secrets(s.Namespace).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.setUp()
	if got := f.read("password"); got != "two" {
		t.Errorf("after the update password = %q, want the new value", got)
	}
	if after := f.data(); after == before {
		t.Errorf("..data still points at %s after the secret changed", before)
	}

	// Deleted: a set-up of a new pod fails naming it; the mounted volume
	// keeps its content.
	if err := c.CoreV1().Secrets(s.Namespace).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	other := newVolumeFixture(t, p, localPod(name+"-other", vol), vol)
	_, err = p.SetUp(t.Context(), other.req)
	if want := "secret default/" + name; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("SetUp with the secret deleted: %v, want an error naming %s", err, want)
	}
	if got := f.read("password"); got != "two" {
		t.Errorf("the mounted volume lost its content: %q", got)
	}
}

func TestConfigMapVolume(t *testing.T) {
	c := client(t)
	name := uniqueName("vol-cm")
	p, err := configmap.NewForClient(clientset.From(c), configmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	optional := true
	vol := v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: name},
		Items:                []v1.KeyToPath{{Key: "app.yaml", Path: "etc/app.yaml"}},
		Optional:             &optional,
	}}}
	f := newVolumeFixture(t, p, localPod(name, vol), vol)

	// Optional and absent: an empty volume.
	f.setUp()
	entries, err := os.ReadDir(f.req.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var visible []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") {
			visible = append(visible, e.Name())
		}
	}
	if len(visible) != 0 {
		t.Errorf("an optional absent configMap gave files %v", visible)
	}

	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}, Data: map[string]string{"app.yaml": "level: info", "other": "x"}}
	if _, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().ConfigMaps(cm.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	f.setUp()
	if got := f.read("etc/app.yaml"); got != "level: info" {
		t.Errorf("etc/app.yaml = %q once the configMap exists", got)
	}
	before := f.data()
	f.setUp()
	if again := f.data(); again != before {
		t.Errorf("..data moved from %s to %s though the configMap did not change", before, again)
	}

	cm.Data["app.yaml"] = "level: debug"
	if _, err := c.CoreV1().ConfigMaps(cm.Namespace).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.setUp()
	if got := f.read("etc/app.yaml"); got != "level: debug" {
		t.Errorf("after the update etc/app.yaml = %q", got)
	}
	if after := f.data(); after == before {
		t.Error("..data did not move after the configMap changed")
	}
}

// TestProjectedServiceAccountToken sets up the volume the API server's
// ServiceAccount admission gives every pod (a token, the namespace) and
// checks that the token is a JWT the API server issued for the pod.
func TestProjectedServiceAccountToken(t *testing.T) {
	c := client(t)
	name := uniqueName("vol-token")
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}}
	if _, err := c.CoreV1().ServiceAccounts(sa.Namespace).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().ServiceAccounts(sa.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	exp := int64(600)
	mode := int32(0o644)
	vol := v1.Volume{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "nodekit-test", ExpirationSeconds: &exp}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}}
	// A token is bound to a pod that exists in the API server.
	pod := newPod(name, "volumes-node")
	pod.Spec.ServiceAccountName = name
	pod.Spec.Volumes = []v1.Volume{vol}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: vol.Name, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	pod = createPod(t, c, pod)

	p, err := projected.NewForClient(clientset.From(c), projected.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newVolumeFixture(t, p, pod, vol)
	f.setUp()
	if got := f.read("namespace"); got != metav1.NamespaceDefault {
		t.Errorf("namespace = %q", got)
	}
	token := f.read("token")

	claims := jwtClaims(t, token)
	wantSub := "system:serviceaccount:default:" + name
	got := map[string]any{
		"sub":      claims.Sub,
		"aud":      claims.Aud,
		"iss":      claims.Iss,
		"lifetime": claims.Exp - claims.Iat,
		"pod":      claims.Kubernetes.Pod.Name + "/" + claims.Kubernetes.Pod.UID,
	}
	want := map[string]any{
		"sub":      wantSub,
		"aud":      []string{"nodekit-test"},
		"iss":      "https://kubernetes.default.svc",
		"lifetime": int64(600),
		"pod":      name + "/" + string(pod.UID),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("token claims (-want +got):\n%s", diff)
	}
	verifySignature(t, token)

	// The API server authenticates it, for the audience asked.
	review, err := c.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{"nodekit-test"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != wantSub {
		t.Errorf("TokenReview: authenticated %v as %q (%s), want %s", review.Status.Authenticated, review.Status.User.Username, review.Status.Error, wantSub)
	}

	// Set up again: the cached token, nothing rewritten.
	before := f.data()
	f.setUp()
	if f.read("token") != token || f.data() != before {
		t.Error("a second SetUp changed the token though it is far from expiry")
	}
}

// TestDownwardAPIVolumeOfAPIPod follows a pod's labels from the API server.
func TestDownwardAPIVolumeOfAPIPod(t *testing.T) {
	c := client(t)
	name := uniqueName("vol-downward")
	vol := v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "uid", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}},
	}}}}
	pod := newPod(name, "volumes-node")
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.Volumes = []v1.Volume{vol}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: vol.Name, MountPath: "/etc/podinfo"}}
	pod = createPod(t, c, pod)

	f := newVolumeFixture(t, downwardapi.New(downwardapi.Options{}), pod, vol)
	f.setUp()
	if got := f.read("labels") + " " + f.read("uid"); got != `app="web" `+string(pod.UID) {
		t.Errorf("labels and uid: %q", got)
	}
	pod.Labels["tier"] = "front"
	pod, err := c.CoreV1().Pods(pod.Namespace).Update(t.Context(), pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.req.Pod = pod
	f.setUp()
	if got := f.read("labels"); got != "app=\"web\"\ntier=\"front\"" {
		t.Errorf("labels after the update: %q", got)
	}
}

type jwtPayload struct {
	Iss        string   `json:"iss"`
	Sub        string   `json:"sub"`
	Aud        []string `json:"aud"`
	Exp        int64    `json:"exp"`
	Iat        int64    `json:"iat"`
	Kubernetes struct {
		Pod struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"pod"`
	} `json:"kubernetes.io"`
}

func jwtClaims(t *testing.T, token string) jwtPayload {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("the token has %d parts, want a JWT's 3", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var p jwtPayload
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("claims %s: %v", b, err)
	}
	return p
}

// verifySignature checks the token's signature with the API server's
// service-account public key, when hack/apiserver.sh's directory has it.
func verifySignature(t *testing.T, token string) {
	t.Helper()
	pemBytes, err := os.ReadFile(filepath.Join(filepath.Dir(kubeconfig(t)), "pki", "sa.pub"))
	if err != nil {
		t.Logf("no service-account public key next to the kubeconfig (%v): signature not checked locally", err)
		return
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("sa.pub is not PEM")
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	var ok bool
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		half := len(sig) / 2
		ok = ecdsa.Verify(k, digest[:], new(big.Int).SetBytes(sig[:half]), new(big.Int).SetBytes(sig[half:]))
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil
	default:
		t.Logf("service-account key of type %T: signature not checked locally", key)
		return
	}
	if !ok {
		t.Error("the token's signature does not verify with the API server's service-account key")
	}
}

// TestAPIVolumesThroughManager sets up a pod's configMap, secret,
// downwardAPI and projected volumes through the volume manager, as the
// agent does, and releases them.
func TestAPIVolumesThroughManager(t *testing.T) {
	c := client(t)
	name := uniqueName("vol-manager")
	ns := metav1.NamespaceDefault
	if _, err := c.CoreV1().ConfigMaps(ns).Create(t.Context(), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "config"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(t.Context(), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"k": []byte("secret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.CoreV1().ServiceAccounts(ns).Delete(ctx, name, metav1.DeleteOptions{})
	})

	vols := []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: name}}}},
		{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: name}}},
		{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
		{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
		}}}},
	}
	pod := newPod(name, "volumes-node")
	pod.Spec.ServiceAccountName = name
	pod.Spec.Volumes = vols
	for _, v := range vols {
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: v.Name, MountPath: "/mnt/" + v.Name})
	}
	pod = createPod(t, c, pod)

	cm, err := configmap.NewForClient(clientset.From(c), configmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := secret.NewForClient(clientset.From(c), secret.Options{})
	if err != nil {
		t.Fatal(err)
	}
	proj, err := projected.NewForClient(clientset.From(c), projected.Options{})
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vm, err := volume.NewManager(root, volume.Options{
		Plugins: []volume.Plugin{cm, sec, downwardapi.New(downwardapi.Options{}), proj},
	})
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := vm.WaitForPodVolumes(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for volName, file := range map[string]string{"config": "k", "creds": "k", "podinfo": "name", "token": "token"} {
		m := mounts[volName]
		if !m.ReadOnly {
			t.Errorf("volume %s is not read-only: %+v", volName, m)
		}
		b, err := os.ReadFile(filepath.Join(m.HostPath, file))
		if err != nil {
			t.Fatal(err)
		}
		got[volName] = string(b)
	}
	if n := len(strings.Split(got["token"], ".")); n != 3 {
		t.Errorf("the token has %d parts, want a JWT", n)
	}
	got["token"] = "<jwt>"
	want := map[string]string{"config": "config", "creds": "secret", "podinfo": name, "token": "<jwt>"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("volume content (-want +got):\n%s", diff)
	}
	if err := vm.ReleasePod(t.Context(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(vm.PodDirs().Pod(pod.UID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the pod directory is still there after ReleasePod: %v", err)
	}
}
