package env

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/podmodel"
)

type recorded struct{ typ, reason, message string }

type recorder struct{ events []recorded }

func (r *recorder) Event(_ apiruntime.Object, typ, reason, message string) {
	r.events = append(r.events, recorded{typ, reason, message})
}

func ptr[T any](v T) *T { return &v }

// store is a Getter over maps, counting reads.
func store() objects.Funcs {
	cms := map[string]*v1.ConfigMap{
		"cfg": {Data: map[string]string{"b": "2", "a": "1", "mode": "fast"}},
	}
	secrets := map[string]*v1.Secret{
		"creds": {Data: map[string][]byte{"password": []byte("s3cr=t"), "user": []byte("admin")}},
		"odd":   {Data: map[string][]byte{"ok": []byte("1"), "A=B": []byte("x")}},
	}
	return objects.Funcs{
		ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
			if cm, ok := cms[name]; ok && ns == "ns" {
				return cm, nil
			}
			return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
		},
		Secret: func(_ context.Context, ns, name string) (*v1.Secret, error) {
			if s, ok := secrets[name]; ok && ns == "ns" {
				return s, nil
			}
			return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
		},
	}
}

func testPod(c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{NodeName: "node1", Containers: []v1.Container{c}},
		Status:     v1.PodStatus{HostIP: "10.0.0.9", HostIPs: []v1.HostIP{{IP: "10.0.0.9"}}},
	}
}

func fieldRef(p string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: p}}
}

func cmKey(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: ptr(optional)}}
}

func secretKey(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: ptr(optional)}}
}

func TestContainer(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	tests := []struct {
		name    string
		c       v1.Container
		noObj   bool
		want    []Var
		wantErr string
		errIs   error
		events  []recorded
	}{{
		name: "values and $(VAR) references in order",
		c: v1.Container{Env: []v1.EnvVar{
			{Name: "A", Value: "x"},
			{Name: "B", Value: "$(A)-$(C)-$$(A)"},
			{Name: "C", Value: "z"},
			{Name: "EMPTY"},
			{Name: "A", Value: "$(A)$(A)"},
		}},
		want: []Var{{"A", "xx"}, {"B", "x-$(C)-$(A)"}, {"C", "z"}, {"EMPTY", ""}},
	}, {
		name: "envFrom with prefixes, env overrides, references to envFrom keys",
		c: v1.Container{
			EnvFrom: []v1.EnvFromSource{
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
				{Prefix: "DB_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}},
			},
			Env: []v1.EnvVar{{Name: "a", Value: "one"}, {Name: "URL", Value: "$(DB_user):$(DB_password)@$(mode)"}},
		},
		want: []Var{{"a", "one"}, {"b", "2"}, {"mode", "fast"}, {"DB_password", "s3cr=t"}, {"DB_user", "admin"}, {"URL", "admin:s3cr=t@fast"}},
	}, {
		name: "values from keys are not expanded",
		c: v1.Container{Env: []v1.EnvVar{
			{Name: "mode", Value: "slow"},
			{Name: "PW", ValueFrom: secretKey("creds", "password", false)},
			{Name: "M", ValueFrom: cmKey("cfg", "mode", false)},
		}},
		want: []Var{{"mode", "slow"}, {"PW", "s3cr=t"}, {"M", "fast"}},
	}, {
		name: "optional references to missing objects and keys are left unset",
		c: v1.Container{
			EnvFrom: []v1.EnvFromSource{
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: ptr(true)}},
				{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: ptr(true)}},
			},
			Env: []v1.EnvVar{
				{Name: "A", ValueFrom: cmKey("absent", "k", true)},
				{Name: "B", ValueFrom: cmKey("cfg", "nokey", true)},
				{Name: "C", ValueFrom: secretKey("absent", "k", true)},
				{Name: "D", ValueFrom: secretKey("creds", "nokey", true)},
				{Name: "E", Value: "e"},
			},
		},
		want: []Var{{"E", "e"}},
	}, {
		name:    "a missing ConfigMap",
		c:       v1.Container{Env: []v1.EnvVar{{Name: "A", ValueFrom: cmKey("absent", "k", false)}}},
		wantErr: `configmaps "absent" not found`,
	}, {
		name:    "a missing key of a ConfigMap",
		c:       v1.Container{Env: []v1.EnvVar{{Name: "A", ValueFrom: cmKey("cfg", "nokey", false)}}},
		wantErr: "couldn't find key nokey in ConfigMap ns/cfg",
	}, {
		name:    "a missing Secret",
		c:       v1.Container{Env: []v1.EnvVar{{Name: "A", ValueFrom: secretKey("absent", "k", false)}}},
		wantErr: `secrets "absent" not found`,
	}, {
		name:    "a missing key of a Secret",
		c:       v1.Container{Env: []v1.EnvVar{{Name: "A", ValueFrom: secretKey("creds", "nokey", false)}}},
		wantErr: "couldn't find key nokey in Secret ns/creds",
	}, {
		name: "a missing envFrom Secret",
		c: v1.Container{EnvFrom: []v1.EnvFromSource{
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}}},
		}},
		wantErr: `secrets "absent" not found`,
	}, {
		name:    "no getter",
		noObj:   true,
		c:       v1.Container{Env: []v1.EnvVar{{Name: "A", ValueFrom: cmKey("cfg", "a", false)}}},
		wantErr: "couldn't get configMap ns/cfg: no ConfigMap and Secret getter configured",
		errIs:   ErrNoObjects,
	}, {
		name: "keys that cannot be variable names are skipped with an event",
		c: v1.Container{EnvFrom: []v1.EnvFromSource{
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "odd"}}},
		}},
		want: []Var{{"ok", "1"}},
		events: []recorded{{v1.EventTypeWarning, ReasonInvalidEnvironmentVariableNames,
			"Keys [A=B] from the EnvFrom secret ns/odd were skipped since they are considered invalid environment variable names."}},
	}, {
		name: "downward API fields",
		c: v1.Container{Env: []v1.EnvVar{
			{Name: "NAME", ValueFrom: fieldRef("metadata.name")},
			{Name: "APP", ValueFrom: fieldRef("metadata.labels['app']")},
			{Name: "NODE", ValueFrom: fieldRef("spec.nodeName")},
			{Name: "IP", ValueFrom: fieldRef("status.podIP")},
			{Name: "IPS", ValueFrom: fieldRef("status.podIPs")},
			{Name: "HOST", ValueFrom: fieldRef("status.hostIP")},
			{Name: "HOSTS", ValueFrom: fieldRef("status.hostIPs")},
		}},
		want: []Var{{"NAME", "web"}, {"APP", "web"}, {"NODE", "node1"}, {"IP", "10.1.0.5"}, {"IPS", "10.1.0.5,fd00::5"},
			{"HOST", "192.168.1.2"}, {"HOSTS", "192.168.1.2,fd01::2"}},
	}, {
		name:    "an invalid label key fails the container (CreateContainerConfigError)",
		c:       v1.Container{Env: []v1.EnvVar{{Name: "L", ValueFrom: fieldRef("metadata.labels['bad key!']")}}},
		wantErr: "invalid key subscript in metadata.labels['bad key!']: ",
		errIs:   podmodel.ErrInvalidField,
	}, {
		name:    "an invalid annotation key fails the container",
		c:       v1.Container{Env: []v1.EnvVar{{Name: "L", ValueFrom: fieldRef("metadata.annotations['-x-']")}}},
		wantErr: "invalid key subscript in metadata.annotations['-x-']: ",
		errIs:   podmodel.ErrInvalidField,
	}, {
		name: "resource fields, with divisors and the node's allocatable",
		c: v1.Container{
			Name: "main",
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")},
			},
			Env: []v1.EnvVar{
				{Name: "CPU_REQ", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
				{Name: "CPU_LIM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "MEM_LIM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			},
		},
		want: []Var{{"CPU_REQ", "250"}, {"CPU_LIM", "2"}, {"MEM_LIM", "8192"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			opts := Options{
				Objects:         store(),
				NodeAllocatable: func() v1.ResourceList { return alloc },
				HostIPs:         func() []string { return []string{"192.168.1.2", "fd01::2"} },
				Recorder:        rec,
			}
			if tt.noObj {
				opts.Objects = nil
			}
			pod := testPod(tt.c)
			got, err := New(opts).Container(t.Context(), pod, &pod.Spec.Containers[0], []string{"10.1.0.5", "fd00::5"})
			if tt.wantErr != "" {
				if err == nil || len(err.Error()) < len(tt.wantErr) || err.Error()[:len(tt.wantErr)] != tt.wantErr {
					t.Fatalf("err = %v, want one starting %q", err, tt.wantErr)
				}
				if tt.errIs != nil && !errors.Is(err, tt.errIs) {
					t.Errorf("err = %v, want one matching %v", err, tt.errIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.events, rec.events, cmp.AllowUnexported(recorded{})); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// Each object is read once per container, however many variables use it.
func TestContainerReadsEachObjectOnce(t *testing.T) {
	reads := map[string]int{}
	s := store()
	get := objects.Funcs{
		ConfigMap: func(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
			reads["cm/"+name]++
			return s.GetConfigMap(ctx, ns, name)
		},
		Secret: func(ctx context.Context, ns, name string) (*v1.Secret, error) {
			reads["secret/"+name]++
			return s.GetSecret(ctx, ns, name)
		},
	}
	c := v1.Container{
		EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		Env: []v1.EnvVar{
			{Name: "A", ValueFrom: cmKey("cfg", "a", false)}, {Name: "B", ValueFrom: cmKey("cfg", "b", false)},
			{Name: "U", ValueFrom: secretKey("creds", "user", false)}, {Name: "P", ValueFrom: secretKey("creds", "password", false)},
		},
	}
	pod := testPod(c)
	if _, err := New(Options{Objects: get}).Container(t.Context(), pod, &pod.Spec.Containers[0], nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"cm/cfg": 1, "secret/creds": 1}, reads); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
}

// TestContainerExpansionBomb checks the bounds of the environment: a value
// that expands past 1 MiB, an environment past 8 MiB (from expanded values,
// from an envFrom source, with redefinitions that free their old values)
// each fail with an error naming the variable, before the large string is
// built.
func TestContainerExpansionBomb(t *testing.T) {
	kib := strings.Repeat("x", 1024)
	bomb := []v1.EnvVar{
		{Name: "V0", Value: kib},
		{Name: "V1", Value: strings.Repeat("$(V0)", 1024)}, // 1 MiB: at the bound
		{Name: "V2", Value: strings.Repeat("$(V1)", 16)},   // 16 MiB
	}
	var many []v1.EnvVar
	many = append(many, bomb[:2]...)
	for i := range 10 {
		many = append(many, v1.EnvVar{Name: fmt.Sprintf("M%d", i), Value: "$(V1)"})
	}
	big := objects.Funcs{ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
		data := map[string]string{}
		for i := range 7 { // 7 MiB
			data[fmt.Sprintf("K%d", i)] = strings.Repeat("c", 1<<20-16)
		}
		if name == "huge" {
			data["K"] = strings.Repeat("h", 1<<20+1)
		}
		return &v1.ConfigMap{Data: data}, nil
	}}
	fromCM := func(name string) []v1.EnvFromSource {
		return []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: name}}}}
	}
	var redefined []v1.EnvVar
	redefined = append(redefined, bomb[:2]...)
	for range 20 {
		redefined = append(redefined, v1.EnvVar{Name: "R", Value: "$(V1)"})
	}
	tests := []struct {
		name    string
		c       v1.Container
		wantErr string // "" for no error
	}{
		{"a value past 1 MiB", v1.Container{Env: bomb}, "env V2: too long: more than 1048576 bytes after $(VAR) expansion"},
		{"an environment past 8 MiB", v1.Container{Env: many}, "env M6: too long: the environment would exceed 8388608 bytes"},
		{"envFrom past 8 MiB", v1.Container{EnvFrom: fromCM("cfg"), Env: many[:2]}, "env V1: too long: the environment would exceed 8388608 bytes"},
		{"an envFrom value past 1 MiB", v1.Container{EnvFrom: fromCM("huge")}, "env K: too long: more than 1048576 bytes"},
		{"redefinitions free their old values", v1.Container{Env: redefined}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(tt.c)
			vars, err := New(Options{Objects: big}).Container(t.Context(), pod, &pod.Spec.Containers[0], nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrTooLong) {
				n := 0
				for _, v := range vars {
					n += len(v.Value)
				}
				t.Fatalf("Container = %d variables of %d bytes, err %v; want %q", len(vars), n, err, tt.wantErr)
			}
		})
	}
}

// BenchmarkContainerExpansionBomb resolves the environment of the bomb of
// four variables that would expand to 4 GiB: the expansion stops at the
// 1 MiB bound, so each resolution allocates about that much.
func BenchmarkContainerExpansionBomb(b *testing.B) {
	pod := testPod(v1.Container{Env: []v1.EnvVar{
		{Name: "V0", Value: strings.Repeat("x", 1024)},
		{Name: "V1", Value: strings.Repeat("$(V0)", 1024)},
		{Name: "V2", Value: strings.Repeat("$(V1)", 256)},
		{Name: "V3", Value: strings.Repeat("$(V2)", 16)},
	}})
	r := New(Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Container(b.Context(), pod, &pod.Spec.Containers[0], nil); !errors.Is(err, ErrTooLong) {
			b.Fatalf("err = %v, want ErrTooLong", err)
		}
	}
}
