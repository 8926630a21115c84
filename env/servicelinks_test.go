package env

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeServices lists from a slice.
type fakeServices struct {
	svcs   []*v1.Service
	synced bool
	err    error
}

func (f *fakeServices) List(ns string) ([]*v1.Service, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []*v1.Service
	for _, s := range f.svcs {
		if s.Namespace == ns {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeServices) HasSynced() bool { return f.synced }

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceVars(t *testing.T) {
	got := ServiceVars(svc("ns", "my-db", "10.0.0.5",
		v1.ServicePort{Name: "pg", Port: 5432},
		v1.ServicePort{Name: "metrics-udp", Port: 9187, Protocol: v1.ProtocolUDP}))
	want := []Var{
		{"MY_DB_SERVICE_HOST", "10.0.0.5"},
		{"MY_DB_SERVICE_PORT", "5432"},
		{"MY_DB_SERVICE_PORT_PG", "5432"},
		{"MY_DB_SERVICE_PORT_METRICS_UDP", "9187"},
		{"MY_DB_PORT", "tcp://10.0.0.5:5432"},
		{"MY_DB_PORT_5432_TCP", "tcp://10.0.0.5:5432"},
		{"MY_DB_PORT_5432_TCP_PROTO", "tcp"},
		{"MY_DB_PORT_5432_TCP_PORT", "5432"},
		{"MY_DB_PORT_5432_TCP_ADDR", "10.0.0.5"},
		{"MY_DB_PORT_9187_UDP", "udp://10.0.0.5:9187"},
		{"MY_DB_PORT_9187_UDP_PROTO", "udp"},
		{"MY_DB_PORT_9187_UDP_PORT", "9187"},
		{"MY_DB_PORT_9187_UDP_ADDR", "10.0.0.5"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ServiceVars (-want +got):\n%s", diff)
	}
	v6 := ServiceVars(svc("ns", "v6", "fd00::1", v1.ServicePort{Port: 80}))
	if v6[2] != (Var{"V6_PORT", "tcp://[fd00::1]:80"}) {
		t.Errorf("IPv6 link variable %v", v6[2])
	}
	for _, s := range []*v1.Service{svc("ns", "headless", "None", v1.ServicePort{Port: 80}), svc("ns", "noip", "", v1.ServicePort{Port: 80}), svc("ns", "noports", "10.0.0.9")} {
		if got := ServiceVars(s); got != nil {
			t.Errorf("%s: %v, want none", s.Name, got)
		}
	}
}

// TestServiceLinks holds the kubelet's rules: the master Service always,
// the pod namespace's Services with enableServiceLinks (which win over the
// master of the same name), no headless ones, the container's own
// definitions first, $(VAR) references to service variables, and API pods
// waiting for the Services to be read once.
func TestServiceLinks(t *testing.T) {
	services := &fakeServices{synced: true, svcs: []*v1.Service{
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443}),
		svc("default", "other", "10.96.0.7", v1.ServicePort{Port: 80}),
		svc("ns", "web", "10.96.0.10", v1.ServicePort{Port: 80}),
		svc("ns", "headless", "None", v1.ServicePort{Port: 80}),
		svc("elsewhere", "far", "10.96.0.11", v1.ServicePort{Port: 80}),
	}}
	names := func(vars []Var) map[string]string { return Map(vars) }
	r := New(Options{Services: services})

	c := v1.Container{Name: "c", Env: []v1.EnvVar{
		{Name: "WEB_SERVICE_PORT", Value: "mine"},
		{Name: "URL", Value: "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)"},
		{Name: "API", Value: "$(KUBERNETES_SERVICE_HOST)"},
	}}
	pod := testPod(c)
	vars, err := r.Container(t.Context(), pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	got := names(vars)
	for k, want := range map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1", "WEB_SERVICE_HOST": "10.96.0.10", "WEB_PORT": "tcp://10.96.0.10:80",
		"WEB_SERVICE_PORT": "mine", "URL": "http://10.96.0.10:mine", "API": "10.96.0.1",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"OTHER_SERVICE_HOST", "HEADLESS_SERVICE_HOST", "FAR_SERVICE_HOST"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s set", k)
		}
	}
	if vars[0].Name != "WEB_SERVICE_PORT" || vars[1].Name != "URL" || vars[2].Name != "API" {
		t.Errorf("the container's variables do not come first: %v", vars[:3])
	}

	// enableServiceLinks false: only the master Service.
	pod.Spec.EnableServiceLinks = ptr(false)
	vars, err = r.Container(t.Context(), pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	got = names(vars)
	if got["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" || got["WEB_SERVICE_HOST"] != "" || got["URL"] != "http://$(WEB_SERVICE_HOST):mine" {
		t.Errorf("without service links: %v", got)
	}

	// A Service named kubernetes in the pod's namespace wins over the master.
	services.svcs = append(services.svcs, svc("ns", "kubernetes", "10.96.0.99", v1.ServicePort{Port: 8443}))
	pod.Spec.EnableServiceLinks = nil
	vars, _ = r.Container(t.Context(), pod, &pod.Spec.Containers[0], nil)
	if got := names(vars)["KUBERNETES_SERVICE_HOST"]; got != "10.96.0.99" {
		t.Errorf("KUBERNETES_SERVICE_HOST = %q, want the namespace's Service", got)
	}

	// Not synced yet: API pods fail, static pods go on.
	services.synced = false
	if _, err := r.Container(t.Context(), pod, &pod.Spec.Containers[0], nil); !errors.Is(err, ErrServicesNotSynced) {
		t.Errorf("API pod before the Services synced: %v, want ErrServicesNotSynced", err)
	}
	static := pod.DeepCopy()
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	if _, err := r.Container(t.Context(), static, &static.Spec.Containers[0], nil); err != nil {
		t.Errorf("static pod before the Services synced: %v", err)
	}

	// A lister error fails the container's environment.
	services.synced, services.err = true, errors.New("boom")
	if _, err := r.Container(t.Context(), pod, &pod.Spec.Containers[0], nil); err == nil {
		t.Error("no error when the Services cannot be listed")
	}

	// No Services: no links, whatever the pod.
	vars, err = New(Options{}).Container(t.Context(), pod, &pod.Spec.Containers[0], nil)
	if err != nil || names(vars)["KUBERNETES_SERVICE_HOST"] != "" {
		t.Errorf("without Services: %v %v", vars, err)
	}
}
