package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func TestWithIdentity(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	a := runtime.WithIdentity(rt, "a")
	b := runtime.WithIdentity(rt, "b")
	if _, ok := a.(runtime.ContainerEventStreamer); !ok {
		t.Fatal("scoping hid the event stream")
	}
	if _, ok := a.(runtime.ImageService); !ok {
		t.Fatal("scoping hid the image service")
	}
	if again := runtime.WithIdentity(a, "c"); again != a {
		t.Error("a scoped runtime was scoped again")
	}
	if got := a.(runtime.Scoped).Identity(); got != "a" {
		t.Errorf("Identity() = %q", got)
	}
	ctx := t.Context()

	// b's event stream, to check that it hears nothing of a's pods.
	events, stop := streamEvents(t, b)

	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u1", Namespace: "default"}, Labels: map[string]string{"x": "1"}}
	sa, err := a.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Labels) != 1 {
		t.Errorf("the caller's config was changed: %v", cfg.Labels)
	}
	ca, err := a.CreateContainer(ctx, sa, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "q", Uid: "u2", Namespace: "default"}}, "")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		rs   runtime.RuntimeService
		want string
	}{{a, sa}, {b, sb}} {
		list, err := tc.rs.ListPodSandbox(ctx, nil)
		if err != nil || len(list) != 1 || list[0].Id != tc.want {
			t.Errorf("%s: ListPodSandbox = %v, %v; want only %s", tc.rs.(runtime.Scoped).Identity(), list, err, tc.want)
		}
	}
	if list, _ := a.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"x": "1"}}); len(list) != 1 {
		t.Errorf("a's selector x=1 found %d sandboxes, want 1", len(list))
	}
	if cs, _ := b.ListContainers(ctx, nil); len(cs) != 0 {
		t.Errorf("b lists a's containers: %v", cs)
	}
	if cs, _ := a.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sa}); len(cs) != 1 || cs[0].Id != ca || cs[0].Labels[runtime.LabelAgent] != "a" {
		t.Errorf("a's containers = %v, want %s labelled a", cs, ca)
	}
	if all, _ := rt.ListPodSandbox(ctx, nil); len(all) != 2 {
		t.Errorf("the runtime itself has %d sandboxes, want 2", len(all))
	}

	// b heard of its own sandbox (created, started) and nothing of a's.
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case ev := <-events:
			got = append(got, ev.ContainerId)
		case <-timeout:
			t.Fatalf("b's events: %v, want two of sandbox %s", got, sb)
		}
	}
	stop()
	for _, id := range got {
		if id != sb {
			t.Errorf("b heard of %s, not its own", id)
		}
	}
	select {
	case ev := <-events:
		t.Errorf("b heard of %s", ev.ContainerId)
	default:
	}
}

// TestWithIdentityWireLists: a scoped runtime lists in wire form only its
// own objects, with the caller's filter, when the runtime it scopes is a
// runtime.WireLister, and answers ErrUnimplemented otherwise.
func TestWithIdentityWireLists(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	ctx := t.Context()
	a := runtime.WithIdentity(runtimetest.Wire{Runtime: rt}, "a").(runtime.WireLister)
	b := runtime.WithIdentity(runtimetest.Wire{Runtime: rt}, "b").(runtime.RuntimeService)
	for _, scope := range []runtime.RuntimeService{a.(runtime.RuntimeService), b, b} {
		sc := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}
		sid, err := scope.RunPodSandbox(ctx, sc, "")
		if err != nil {
			t.Fatal(err)
		}
		cc := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}
		if _, err := scope.CreateContainer(ctx, sid, cc, sc); err != nil {
			t.Fatal(err)
		}
	}
	var sbs runtimeapi.ListPodSandboxResponse
	buf, err := a.ListPodSandboxWire(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"x": "y"}}, nil)
	if err != nil || proto.Unmarshal(buf, &sbs) != nil || len(sbs.Items) != 0 {
		t.Errorf("scoped ListPodSandboxWire with a selector nothing has = %d sandboxes, %v; want none", len(sbs.Items), err)
	}
	buf, err = a.ListPodSandboxWire(ctx, nil, nil)
	if err != nil || proto.Unmarshal(buf, &sbs) != nil || len(sbs.Items) != 1 || sbs.Items[0].Labels[runtime.LabelAgent] != "a" {
		t.Errorf("scoped ListPodSandboxWire = %v, %v; want the one sandbox of a", sbs.Items, err)
	}
	var cs runtimeapi.ListContainersResponse
	buf, err = b.(runtime.WireLister).ListContainersWire(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{}}, nil)
	if err != nil || proto.Unmarshal(buf, &cs) != nil || len(cs.Containers) != 2 || cs.Containers[0].Labels[runtime.LabelAgent] != "b" {
		t.Errorf("scoped ListContainersWire = %v, %v; want the two created containers of b", cs.Containers, err)
	}

	plain := runtime.WithIdentity(rt, "a").(runtime.WireLister)
	if _, err := plain.ListPodSandboxWire(ctx, nil, nil); !errors.Is(err, runtime.ErrUnimplemented) {
		t.Errorf("ListPodSandboxWire scoping a runtime without wire lists = %v, want ErrUnimplemented", err)
	}
	if _, err := plain.ListContainersWire(ctx, nil, nil); !errors.Is(err, runtime.ErrUnimplemented) {
		t.Errorf("ListContainersWire scoping a runtime without wire lists = %v, want ErrUnimplemented", err)
	}
}

// recordingRuntime keeps the configs it is given.
type recordingRuntime struct {
	runtime.RuntimeService
	sandbox, sandboxOfContainer *runtimeapi.PodSandboxConfig
	container                   *runtimeapi.ContainerConfig
}

func (r *recordingRuntime) RunPodSandbox(_ context.Context, c *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	r.sandbox = c
	return "s", nil
}

func (r *recordingRuntime) CreateContainer(_ context.Context, _ string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	r.container, r.sandboxOfContainer = c, sc
	return "c", nil
}

// TestWithIdentityPassesConfigs: the scoped runtime passes on every field
// of the configs, the agent's label added, and leaves the caller's as
// they were.
func TestWithIdentityPassesConfigs(t *testing.T) {
	sandbox := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u", Namespace: "ns", Attempt: 2},
		Hostname: "p", LogDirectory: "/var/log/pods/ns_p_u",
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}},
		PortMappings: []*runtimeapi.PortMapping{{ContainerPort: 80}},
		Labels:       map[string]string{"x": "1"}, Annotations: map[string]string{"y": "2"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods"},
	}
	container := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c", Attempt: 1},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"}, Command: []string{"sleep"}, Args: []string{"1"},
		Envs:   []*runtimeapi.KeyValue{{Key: "K", Value: []byte("V")}},
		Mounts: []*runtimeapi.Mount{{ContainerPath: "/etc/hosts", HostPath: "/h"}},
		Labels: map[string]string{"z": "3"}, LogPath: "c/1.log", Tty: true,
	}
	sandboxBefore, containerBefore := proto.Clone(sandbox), proto.Clone(container)
	checkScopedConfigs(t, sandbox, container)
	if !proto.Equal(sandbox, sandboxBefore) || !proto.Equal(container, containerBefore) {
		t.Error("the caller's configs were changed")
	}
}

// TestWithIdentityCopiesEveryField: every field of the configs the CRI
// defines, set, reaches the runtime behind the scoped one, so that a
// field the CRI adds is not dropped by the scoped runtime's copies.
func TestWithIdentityCopiesEveryField(t *testing.T) {
	sandbox := &runtimeapi.PodSandboxConfig{}
	container := &runtimeapi.ContainerConfig{}
	fillFields(t, sandbox.ProtoReflect())
	fillFields(t, container.ProtoReflect())
	checkScopedConfigs(t, sandbox, container)
}

// checkScopedConfigs runs sandbox and container through a runtime scoped
// to identity "a" and checks that the runtime behind it got them whole,
// every field set in them set, with the identity's label added.
func checkScopedConfigs(t *testing.T, sandbox *runtimeapi.PodSandboxConfig, container *runtimeapi.ContainerConfig) {
	t.Helper()
	rec := &recordingRuntime{}
	rs := runtime.WithIdentity(rec, "a")
	if _, err := rs.RunPodSandbox(t.Context(), sandbox, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.CreateContainer(t.Context(), "s", container, sandbox); err != nil {
		t.Fatal(err)
	}
	wantSandbox := proto.Clone(sandbox).(*runtimeapi.PodSandboxConfig)
	wantSandbox.Labels[runtime.LabelAgent] = "a"
	wantContainer := proto.Clone(container).(*runtimeapi.ContainerConfig)
	wantContainer.Labels[runtime.LabelAgent] = "a"
	for _, c := range []struct {
		name      string
		got, want proto.Message
	}{
		{"RunPodSandbox's config", rec.sandbox, wantSandbox},
		{"CreateContainer's config", rec.container, wantContainer},
		{"CreateContainer's sandbox config", rec.sandboxOfContainer, wantSandbox},
	} {
		c.want.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if !c.got.ProtoReflect().Has(fd) {
				t.Errorf("%s: field %s dropped", c.name, fd.Name())
			}
			return true
		})
		if !proto.Equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// fillFields sets every field of m, and of none of its messages, to a
// value other than its default, and adds an unknown field.
func fillFields(t *testing.T, m protoreflect.Message) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			m.Mutable(fd).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString("v"))
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				l.Append(protoreflect.ValueOfMessage(l.NewElement().Message()))
			} else {
				l.Append(scalarValue(t, fd))
			}
		case fd.Kind() == protoreflect.MessageKind:
			m.Mutable(fd)
		default:
			m.Set(fd, scalarValue(t, fd))
		}
	}
	m.SetUnknown(protoreflect.RawFields{0xf8, 0x3e, 0x01}) // field 999, varint 1
}

func scalarValue(t *testing.T, fd protoreflect.FieldDescriptor) protoreflect.Value {
	t.Helper()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	}
	t.Fatalf("field %s: kind %v not filled", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

// BenchmarkScopedCreateContainer is the scoped runtime's own cost of a
// container's creation: the copies of its configs with the agent's label.
func BenchmarkScopedCreateContainer(b *testing.B) {
	rs := runtime.WithIdentity(&recordingRuntime{}, "a")
	sandbox := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u", Namespace: "ns"},
		Hostname: "p", LogDirectory: "/var/log/pods/ns_p_u",
		DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}},
		Labels:    map[string]string{"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.uid": "u"},
		Linux:     &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods"},
	}
	container := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"}, Command: []string{"sleep"},
		Labels:  map[string]string{"io.kubernetes.container.name": "c", "io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.uid": "u"},
		LogPath: "c/0.log",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rs.CreateContainer(b.Context(), "s", container, sandbox); err != nil {
			b.Fatal(err)
		}
	}
}
