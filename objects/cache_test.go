package objects

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// counting is a Getter over a map that counts reads and can be changed.
type counting struct {
	data  map[string]string // name → value of key "k"
	reads int
}

func (c *counting) GetConfigMap(_ context.Context, _, name string) (*v1.ConfigMap, error) {
	c.reads++
	v, ok := c.data[name]
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
	}
	return &v1.ConfigMap{Data: map[string]string{"k": v}}, nil
}

func (c *counting) GetSecret(_ context.Context, _, name string) (*v1.Secret, error) {
	c.reads++
	v, ok := c.data[name]
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
	}
	return &v1.Secret{Data: map[string][]byte{"k": []byte(v)}}, nil
}

func TestCacheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &counting{data: map[string]string{"a": "1"}}
	c, err := NewCache(src, CacheOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		cm, err := c.GetConfigMap(t.Context(), "ns", "a")
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["k"]
	}
	if got := read(); got != "1" || src.reads != 1 {
		t.Fatalf("first read = %q after %d reads", got, src.reads)
	}
	src.data["a"] = "2"
	clk.Step(DefaultTTL - time.Second)
	if got := read(); got != "1" || src.reads != 1 {
		t.Errorf("read within the TTL = %q after %d reads, want the cached 1 after 1", got, src.reads)
	}
	clk.Step(time.Second)
	if got := read(); got != "2" || src.reads != 2 {
		t.Errorf("read at the TTL = %q after %d reads, want 2 after 2", got, src.reads)
	}

	// Errors are not cached.
	for range 2 {
		if _, err := c.GetSecret(t.Context(), "ns", "missing"); !apierrors.IsNotFound(err) {
			t.Fatalf("missing secret: err = %v, want NotFound", err)
		}
	}
	if src.reads != 4 {
		t.Errorf("reads = %d, want 4: a missing object is asked for each time", src.reads)
	}
	// ConfigMaps and Secrets of one name are different objects.
	src.data["a"] = "3"
	s, err := c.GetSecret(t.Context(), "ns", "a")
	if err != nil || string(s.Data["k"]) != "3" {
		t.Errorf("secret a = %v, %v; want 3", s, err)
	}
}

func TestCacheRegisterPod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &counting{data: map[string]string{"cfg": "1", "other": "x"}}
	c, _ := NewCache(src, CacheOptions{Clock: clk})
	_, _ = c.GetConfigMap(t.Context(), "ns", "cfg")
	_, _ = c.GetConfigMap(t.Context(), "ns", "other")
	src.data["cfg"] = "2"
	src.data["other"] = "y"
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", UID: "p1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{
			ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "k"},
		}}}}}},
	}
	c.RegisterPod(pod)
	if cm, _ := c.GetConfigMap(t.Context(), "ns", "cfg"); cm.Data["k"] != "2" {
		t.Errorf("after a new pod that refers to it, cfg = %q, want the new 2", cm.Data["k"])
	}
	if cm, _ := c.GetConfigMap(t.Context(), "ns", "other"); cm.Data["k"] != "x" {
		t.Errorf("other = %q, want the cached x: no new pod refers to it", cm.Data["k"])
	}
	src.data["cfg"] = "3"
	c.RegisterPod(pod) // seen already: nothing to refresh
	if cm, _ := c.GetConfigMap(t.Context(), "ns", "cfg"); cm.Data["k"] != "2" {
		t.Errorf("after the same pod again, cfg = %q, want the cached 2", cm.Data["k"])
	}
	c.UnregisterPod(pod.UID)
	c.RegisterPod(pod)
	if cm, _ := c.GetConfigMap(t.Context(), "ns", "cfg"); cm.Data["k"] != "3" {
		t.Errorf("after the pod came back, cfg = %q, want 3", cm.Data["k"])
	}
}

func TestCacheSweeps(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	src := &counting{data: map[string]string{"a": "1", "b": "2"}}
	c, _ := NewCache(src, CacheOptions{Clock: clk, TTL: time.Minute})
	_, _ = c.GetConfigMap(t.Context(), "ns", "a")
	_, _ = c.GetConfigMap(t.Context(), "ns", "b")
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	clk.Step(2 * time.Minute)
	_, _ = c.GetConfigMap(t.Context(), "ns", "a")
	if c.Len() != 1 {
		t.Errorf("Len after the TTL = %d, want 1: b aged out", c.Len())
	}
}

func TestCacheNoTTL(t *testing.T) {
	src := &counting{data: map[string]string{"a": "1"}}
	c, _ := NewCache(src, CacheOptions{TTL: -1})
	for range 3 {
		_, _ = c.GetConfigMap(t.Context(), "ns", "a")
	}
	if src.reads != 3 || c.Len() != 0 {
		t.Errorf("reads = %d, Len = %d; want 3 and 0 with a negative TTL", src.reads, c.Len())
	}
}

func TestReferences(t *testing.T) {
	opt := func(n string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: n} }
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{opt("pull"), opt("")},
		InitContainers:   []v1.Container{{EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: opt("init-cm")}}}}},
		Containers: []v1.Container{{Env: []v1.EnvVar{
			{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: opt("s1")}}},
			{Name: "B", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: opt("init-cm")}}},
		}}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: opt("debug")}}}}}},
		Volumes: []v1.Volume{
			{VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: opt("vol-cm")}}},
			{VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "vol-s"}}},
			{VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: opt("proj-cm")}},
				{Secret: &v1.SecretProjection{LocalObjectReference: opt("s1")}},
			}}}},
		},
	}}
	cms, secrets := References(pod)
	if want := []string{"init-cm", "proj-cm", "vol-cm"}; !slices.Equal(cms, want) {
		t.Errorf("configMaps = %v, want %v", cms, want)
	}
	if want := []string{"debug", "pull", "s1", "vol-s"}; !slices.Equal(secrets, want) {
		t.Errorf("secrets = %v, want %v", secrets, want)
	}
}

func TestFuncsNil(t *testing.T) {
	if _, err := (Funcs{}).GetConfigMap(t.Context(), "ns", "x"); !apierrors.IsNotFound(err) {
		t.Errorf("nil ConfigMap func: err = %v, want NotFound", err)
	}
	if _, err := (Funcs{}).GetSecret(t.Context(), "ns", "x"); !apierrors.IsNotFound(err) {
		t.Errorf("nil Secret func: err = %v, want NotFound", err)
	}
	if _, err := NewCache(nil, CacheOptions{}); err == nil {
		t.Error("NewCache(nil) succeeded")
	}
}
