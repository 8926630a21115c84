package userns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime answers CRI Status with the given handlers.
type fakeRuntime struct {
	handlers []*runtimeapi.RuntimeHandler
	err      error
}

func (f *fakeRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}, RuntimeHandlers: f.handlers}, nil
}

func supporting(names ...string) *fakeRuntime {
	f := &fakeRuntime{}
	for _, n := range names {
		f.handlers = append(f.handlers, &runtimeapi.RuntimeHandler{Name: n, Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}})
	}
	return f
}

func userPod(uid string, hostUsers *bool) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}, Spec: v1.PodSpec{HostUsers: hostUsers}}
}

func ptr[T any](v T) *T { return &v }

func newManager(t *testing.T, opts Options) *Manager {
	t.Helper()
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	if opts.Rand == nil {
		opts.Rand = rand.New(rand.NewPCG(1, 2))
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewChecksOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"relative root", Options{RootDir: "var/lib"}, `userns: RootDir "var/lib" is not an absolute path`},
		{"ids not a multiple", Options{RootDir: "/r", IDsPerPod: 65536 + 1}, "userns: kubelet user namespace length 65537 is not a multiple of 65536"},
		{"negative max pods", Options{RootDir: "/r", MaxPods: -1}, "userns: negative MaxPods -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRange is the kubelet's MakeUserNsManager table, with the blocks
// each range holds.
func TestRange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       *Range // nil: the default
		ids     uint32
		maxPods int
		pods    int
		err     string
	}{
		{name: "default", pods: 65534},
		{name: "default, 2^20 per pod", ids: 1 << 20, pods: 4094},
		{name: "2000 pods", r: &Range{65536, 65536 * 2000}, pods: 2000},
		{name: "firstID not multiple", r: &Range{65536 + 1, 65536 * 200}, err: "userns: kubelet user assigned ID 65537 is not a multiple of 65536"},
		{name: "firstID below 65536", r: &Range{0, 65536 * 200}, err: "userns: kubelet user assigned ID 0 must be greater or equal to 65536"},
		{name: "length not multiple", r: &Range{65536, 65536 + 1}, err: "userns: kubelet user assigned IDs length 65537 is not a multiple of 65536"},
		{name: "range can't fit maxPods", r: &Range{65536, 65536}, maxPods: 2, err: "userns: kubelet user assigned IDs are not enough to support 2 pods"},
		{name: "range ends at 2^32: last block left out", r: &Range{65536, 1<<32 - 65536}, pods: 65534},
		{name: "range past 2^32: wrapping blocks left out", r: &Range{327680, 4294836224}, pods: 65530},
		{name: "one pod", r: &Range{65536, 65536}, maxPods: 1, pods: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Options{Range: tc.r, IDsPerPod: tc.ids, MaxPods: tc.maxPods})
			m.subIDs = noKubeletUser()
			_, err := m.podMapping(t.Context(), "a")
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, ErrRange) {
					t.Fatalf("got %v, want %q (ErrRange)", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Free() + 1; got != tc.pods {
				t.Errorf("pods in range: got %d, want %d", got, tc.pods)
			}
		})
	}
}

func noKubeletUser() subIDSource {
	return subIDSource{
		lookupUser: func(name string) error { return user.UnknownUserError(name) },
		lookPath:   func(string) (string, error) { return "", exec.ErrNotFound },
		output:     func(context.Context, string, ...string) ([]byte, error) { return nil, errors.New("not called") },
	}
}

// TestAllocate fills a range: every block once, none twice, all within
// the range, then the kubelet's exhaustion error; a released block is
// handed out again.
func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Range
		ids  uint32
	}{
		{"small", Range{65536, 65536 * 30}, 65536},
		{"2^20 per pod", Range{1 << 20, (1 << 20) * 20}, 1 << 20},
		{"top of the ID space", Range{1<<32 - 65536*20, 65536 * 20}, 65536},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Options{Range: &tc.r, IDsPerPod: tc.ids, MaxPods: 10})
			ids := tc.ids
			if ids == 0 {
				ids = DefaultIDsPerPod
			}
			seen := map[uint32]types.UID{}
			for i := 0; ; i++ {
				uid := types.UID(fmt.Sprint("pod-", i))
				mp, err := m.podMapping(t.Context(), uid)
				if errors.Is(err, ErrExhausted) {
					if !strings.Contains(err.Error(), "could not find an empty slot to allocate a user namespace") {
						t.Errorf("exhausted: %v", err)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if other, dup := seen[mp.HostID]; dup {
					t.Fatalf("%s got %d, already %s's", uid, mp.HostID, other)
				}
				seen[mp.HostID] = uid
				end := uint64(mp.HostID) + uint64(mp.Length) - 1
				if mp.Length != ids || mp.HostID < tc.r.First || end > uint64(tc.r.First)+uint64(tc.r.Length)-1 || end >= 1<<32-1 {
					t.Fatalf("%s: mapping %+v outside %+v or reaching 2^32-1", uid, mp, tc.r)
				}
			}
			want := int(tc.r.Length / ids)
			if uint64(tc.r.First)+uint64(tc.r.Length) == 1<<32 {
				want-- // the block that ends at 2^32-1
			}
			if len(seen) != want {
				t.Errorf("allocated %d pods, want %d", len(seen), want)
			}
			m.Release("pod-3")
			if _, err := os.Stat(m.file("pod-3")); !os.IsNotExist(err) {
				t.Errorf("file of a released pod: %v", err)
			}
			mp, err := m.podMapping(t.Context(), "again")
			if err != nil {
				t.Fatalf("after a release: %v", err)
			}
			if seen[mp.HostID] != "pod-3" {
				t.Errorf("after a release got %d, want pod-3's block", mp.HostID)
			}
		})
	}
}

func TestPodUserNamespace(t *testing.T) {
	forbidden := func(f string) string { return "spec." + f + ": Forbidden: when `hostUsers` is false" }
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		mutate  func(*v1.Pod)
		rt      StatusGetter
		handler string
		mode    runtimeapi.NamespaceMode
		class   error
		err     string
	}{
		{name: "nil pod", mode: runtimeapi.NamespaceMode_NODE},
		{name: "hostUsers unset", pod: userPod("a", nil), mode: runtimeapi.NamespaceMode_NODE},
		{name: "hostUsers true", pod: userPod("a", ptr(true)), mode: runtimeapi.NamespaceMode_NODE},
		{name: "hostUsers false", pod: userPod("a", ptr(false)), rt: supporting(""), mode: runtimeapi.NamespaceMode_POD},
		{name: "RuntimeClass handler", pod: userPod("a", ptr(false)), rt: supporting("", "kata"), handler: "kata", mode: runtimeapi.NamespaceMode_POD},
		{name: "no runtime support", pod: userPod("a", ptr(false)), rt: &fakeRuntime{handlers: []*runtimeapi.RuntimeHandler{{Name: ""}}},
			class: ErrNotSupported, err: "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{name: "RuntimeClass handler without support", pod: userPod("a", ptr(false)), rt: supporting(""), handler: "kata",
			class: ErrNotSupported, err: `can't set ` + "`spec.hostUsers: false`" + `, RuntimeClass handler "kata" does not support user namespaces: the handler "kata" is not known`},
		{name: "runtime reports no handlers", pod: userPod("a", ptr(false)), rt: &fakeRuntime{},
			class: ErrNotSupported, err: "can't set `spec.hostUsers: false`, runtime does not support user namespaces: runtime handlers are not set"},
		{name: "no runtime", pod: userPod("a", ptr(false)),
			class: ErrNotSupported, err: "can't set `spec.hostUsers: false`, runtime does not support user namespaces: runtime handlers are not set"},
		{name: "runtime status fails", pod: userPod("a", ptr(false)), rt: &fakeRuntime{err: errors.New("connection refused")},
			class: ErrNotSupported, err: "can't set `spec.hostUsers: false`, runtime does not support user namespaces: connection refused"},
		{name: "hostNetwork", pod: userPod("a", ptr(false)), mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true }, rt: supporting(""),
			class: ErrHostNamespaces, err: forbidden("hostNetwork")},
		{name: "hostPID and hostIPC", pod: userPod("a", ptr(false)), mutate: func(p *v1.Pod) { p.Spec.HostPID, p.Spec.HostIPC = true, true }, rt: supporting(""),
			class: ErrHostNamespaces, err: "[" + forbidden("HostPID") + ", " + forbidden("HostIPC") + "]"},
		{name: "hostNetwork with host users", pod: userPod("a", ptr(true)), mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true }, mode: runtimeapi.NamespaceMode_NODE},
		{name: "volumeDevices of init, app and ephemeral containers", pod: userPod("a", ptr(false)), mutate: func(p *v1.Pod) {
			vd := []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
			p.Spec.InitContainers = []v1.Container{{Name: "i"}, {Name: "j", VolumeDevices: vd}}
			p.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: vd}}
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e", VolumeDevices: vd}}}
		}, rt: supporting(""), class: ErrVolumeDevices, err: "[" + forbidden("initContainers[1].volumeDevices") + ", " + forbidden("containers[0].volumeDevices") + ", " + forbidden("ephemeralContainers[0].volumeDevices") + "]"},
		{name: "hostIPC and volumeDevices", pod: userPod("a", ptr(false)), mutate: func(p *v1.Pod) {
			p.Spec.HostIPC = true
			p.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}}}
		}, rt: supporting(""), class: ErrHostNamespaces, err: "[" + forbidden("HostIPC") + ", " + forbidden("containers[0].volumeDevices") + "]"},
		{name: "volumeDevices with host users", pod: userPod("a", ptr(true)), mutate: func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}}}
		}, mode: runtimeapi.NamespaceMode_NODE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Options{Runtime: tc.rt, Range: &Range{65536, 65536 * 200}})
			if tc.mutate != nil {
				tc.mutate(tc.pod)
			}
			got, err := m.PodUserNamespace(t.Context(), tc.pod, tc.handler)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, tc.class) {
					t.Fatalf("got %v, want %q (%v)", err, tc.err, tc.class)
				}
				if _, ok := m.Allocated(tc.pod.UID); ok {
					t.Error("a refused pod holds a range")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.GetMode() != tc.mode {
				t.Fatalf("mode %v, want %v", got.GetMode(), tc.mode)
			}
			if tc.mode != runtimeapi.NamespaceMode_POD {
				if len(got.GetUids())+len(got.GetGids()) != 0 {
					t.Errorf("mappings with mode NODE: %v", got)
				}
				return
			}
			mp, ok := m.Allocated(tc.pod.UID)
			if !ok {
				t.Fatal("no allocation recorded")
			}
			want := []*runtimeapi.IDMapping{{HostId: mp.HostID, ContainerId: 0, Length: 65536}}
			if diff := cmp.Diff(want, got.Uids, cmpopts.IgnoreUnexported(runtimeapi.IDMapping{})); diff != "" {
				t.Errorf("uids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, got.Gids, cmpopts.IgnoreUnexported(runtimeapi.IDMapping{})); diff != "" {
				t.Errorf("gids (-want +got):\n%s", diff)
			}
			data, err := os.ReadFile(filepath.Join(m.opts.RootDir, "pods", "a", "userns"))
			if err != nil {
				t.Fatal(err)
			}
			wantFile := fmt.Sprintf(`{"uidMappings":[{"hostId":%d,"containerId":0,"length":65536}],"gidMappings":[{"hostId":%d,"containerId":0,"length":65536}]}`, mp.HostID, mp.HostID)
			if string(data) != wantFile {
				t.Errorf("file %s, want %s", data, wantFile)
			}
			// Each container of the pod gets the same mapping.
			again, err := m.PodUserNamespace(t.Context(), tc.pod, tc.handler)
			if err != nil || again.Uids[0].HostId != mp.HostID {
				t.Errorf("second call: %v, %v; want host ID %d", again, err, mp.HostID)
			}
		})
	}
}

// TestRecovery writes pod directories as a previous run (or a kubelet)
// left them, starts a Manager on them, and checks what each pod gets.
func TestRecovery(t *testing.T) {
	file := func(host, ctr, length uint32) string {
		return fmt.Sprintf(`{"uidMappings":[{"hostId":%d,"containerId":%d,"length":%d}],"gidMappings":[{"hostId":%d,"containerId":%d,"length":%d}]}`,
			host, ctr, length, host, ctr, length)
	}
	const r0 = 65536 // the range's first block
	for _, tc := range []struct {
		name string
		// files by pod UID, written before the Manager starts.
		files map[string]string
		// want is the host ID each pod gets (0: a new one).
		want map[string]uint32
		// errs are the errors of pods that get none.
		errs map[string]string
	}{
		{
			name:  "valid files are kept",
			files: map[string]string{"a": file(r0*3, 0, 65536), "b": file(r0*7, 0, 65536)},
			want:  map[string]uint32{"a": r0 * 3, "b": r0 * 7},
		},
		{
			name:  "out of the current range: kept",
			files: map[string]string{"a": file(r0*500, 0, 65536)},
			want:  map[string]uint32{"a": r0 * 500},
		},
		{
			name:  "empty file: a new mapping",
			files: map[string]string{"a": ""},
			want:  map[string]uint32{"a": 0},
		},
		{
			name:  "corrupt JSON",
			files: map[string]string{"a": `{"uidMappings":[{"hostId":`, "b": file(r0*2, 0, 65536)},
			want:  map[string]uint32{"b": r0 * 2},
			errs:  map[string]string{"a": "user namespace: invalid user namespace mappings file: unexpected end of JSON input"},
		},
		{
			name:  "negative host ID",
			files: map[string]string{"a": file(0, 0, 0)[:0] + `{"uidMappings":[{"hostId":-1,"containerId":0,"length":65536}],"gidMappings":[{"hostId":-1,"containerId":0,"length":65536}]}`},
			errs:  map[string]string{"a": "user namespace: invalid user namespace mappings file: json: cannot unmarshal number -1 into Go struct field idMapping.uidMappings.hostId of type uint32"},
		},
		{
			name:  "two UID mappings",
			files: map[string]string{"a": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536},{"hostId":196608,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`},
			errs:  map[string]string{"a": "user namespace: invalid user namespace configuration: no more than one mapping allowed."},
		},
		{
			name:  "two GID mappings",
			files: map[string]string{"a": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536},{"hostId":196608,"containerId":0,"length":65536}]}`},
			errs:  map[string]string{"a": "user namespace: invalid user namespace configuration: GID and UID mappings should be identical."},
		},
		{
			name:  "UID and GID differ",
			files: map[string]string{"a": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":196608,"containerId":0,"length":65536}]}`},
			errs:  map[string]string{"a": "user namespace: invalid user namespace configuration: GID and UID mapping should be identical"},
		},
		{
			name:  "root not mapped",
			files: map[string]string{"a": file(r0*2, 1, 65536)},
			errs:  map[string]string{"a": "user namespace: invalid user namespace configuration: UID 0 must be mapped"},
		},
		{
			name:  "wrong length",
			files: map[string]string{"a": file(r0*2, 0, 131072)},
			errs:  map[string]string{"a": "user namespace: wrong user namespace length 131072"},
		},
		{
			name:  "zero length",
			files: map[string]string{"a": file(r0*2, 0, 0)},
			errs:  map[string]string{"a": "user namespace: wrong user namespace length 0"},
		},
		{
			name:  "wrong offset",
			files: map[string]string{"a": file(r0*2+1, 0, 65536)},
			errs:  map[string]string{"a": "user namespace: wrong user namespace offset specified 131073"},
		},
		{
			name:  "reaches 2^32-1",
			files: map[string]string{"a": file(1<<32-65536, 0, 65536)},
			errs:  map[string]string{"a": "user namespace: invalid user namespace configuration: host IDs 4294901760+65536 reach past 4294967294"},
		},
		{
			name:  "one range for two pods",
			files: map[string]string{"a": file(r0*4, 0, 65536), "b": file(r0*4, 0, 65536)},
			want:  map[string]uint32{"a": r0 * 4},
			errs:  map[string]string{"b": `user namespace: range picked for pod "b" already taken`},
		},
		{
			name:  "one out-of-range range for two pods",
			files: map[string]string{"a": file(r0*900, 0, 65536), "b": file(r0*900, 0, 65536)},
			want:  map[string]uint32{"a": r0 * 900},
			errs:  map[string]string{"b": `user namespace: range picked for pod "b" already taken by pod "a"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for uid, data := range tc.files {
				dir := filepath.Join(root, "pods", uid)
				if err := os.MkdirAll(dir, 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "userns"), []byte(data), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			// A stray file and a pod directory without a mapping.
			if err := os.WriteFile(filepath.Join(root, "pods", "stray"), nil, 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(root, "pods", "plain"), 0o750); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, Options{RootDir: root, Runtime: supporting(""), Range: &Range{65536, 65536 * 20}, MaxPods: 10})
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error)
				go func() { done <- m.Run(ctx) }()
				synctest.Wait()
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
			if _, ok := m.Allocated("plain"); ok {
				t.Error("a pod directory without a file holds a range")
			}
			// The pods recorded at start hold their blocks before any pod
			// asks: fill the range and check no new pod gets one of them.
			got := map[string]uint32{}
			for _, uid := range sortedKeys(tc.want, tc.errs) {
				ns, err := m.PodUserNamespace(t.Context(), userPod(uid, ptr(false)), "")
				if want, bad := tc.errs[uid]; bad {
					if err == nil || err.Error() != want || !errors.Is(err, ErrBadMappings) {
						t.Errorf("pod %s: got %v, want %q (ErrBadMappings)", uid, err, want)
					}
					continue
				}
				if err != nil {
					t.Fatalf("pod %s: %v", uid, err)
				}
				got[uid] = ns.Uids[0].HostId
			}
			for uid, want := range tc.want {
				if want != 0 && got[uid] != want {
					t.Errorf("pod %s got host ID %d, want %d", uid, got[uid], want)
				}
			}
			for i := 0; ; i++ {
				ns, err := m.PodUserNamespace(t.Context(), userPod(fmt.Sprint("new-", i), ptr(false)), "")
				if errors.Is(err, ErrExhausted) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for uid, h := range got {
					if ns.Uids[0].HostId == h {
						t.Fatalf("new pod got %d, pod %s's", h, uid)
					}
				}
			}
		})
	}
}

func sortedKeys(want map[string]uint32, errs map[string]string) []string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range errs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestParseGetSubIDs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Range
		err  string
	}{
		{in: "0: kubelet 65536 2147483648\n", want: Range{65536, 2147483648}},
		{in: "0: kubelet 65536 2147483648\n1: kubelet 2147549184 65536\n", err: `userns: error parsing line "0: kubelet 65536 2147483648\n1: kubelet 2147549184 65536\n": it must contain only one line`},
		{in: "0: kubelet 65536\n", err: `userns: invalid line "0: kubelet 65536\n"`},
		{in: "0: kubelet x 65536\n", err: `userns: error parsing line "0: kubelet x 65536\n": strconv.ParseUint: parsing "x": invalid syntax`},
		{in: "0: kubelet 65536 4294967296\n", err: `userns: error parsing line "0: kubelet 65536 4294967296\n": strconv.ParseUint: parsing "4294967296": value out of range`},
	} {
		got, err := parseGetSubIDs(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: got %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestKubeletRange(t *testing.T) {
	out := func(uids, gids string, err error) func(context.Context, string, ...string) ([]byte, error) {
		return func(_ context.Context, name string, args ...string) ([]byte, error) {
			if name != "/usr/bin/getsubids" {
				return nil, fmt.Errorf("ran %s", name)
			}
			if len(args) == 2 && args[0] == "-g" && args[1] == "kubelet" {
				return []byte(gids), err
			}
			if len(args) == 1 && args[0] == "kubelet" {
				return []byte(uids), err
			}
			return nil, fmt.Errorf("args %q", args)
		}
	}
	found := func(string) error { return nil }
	tool := func(string) (string, error) { return "/usr/bin/getsubids", nil }
	for _, tc := range []struct {
		name string
		src  subIDSource
		want Range
		err  string
	}{
		{name: "no kubelet user", src: noKubeletUser(), want: Range{65536, 1<<32 - 65536}},
		{name: "no getsubids", src: subIDSource{lookupUser: found, lookPath: func(string) (string, error) { return "", &exec.Error{Name: "getsubids", Err: exec.ErrNotFound} }},
			want: Range{65536, 1<<32 - 65536}},
		{name: "user lookup fails", src: subIDSource{lookupUser: func(string) error { return errors.New("nsswitch broken") }},
			err: `userns: looking up user "kubelet": nsswitch broken`},
		{name: "subordinate IDs", src: subIDSource{lookupUser: found, lookPath: tool, output: out("0: kubelet 1048576 8388608\n", "0: kubelet 1048576 8388608\n", nil)},
			want: Range{1048576, 8388608}},
		{name: "mismatched", src: subIDSource{lookupUser: found, lookPath: tool, output: out("0: kubelet 1048576 8388608\n", "0: kubelet 65536 8388608\n", nil)},
			err: `userns: mismatched subuids and subgids for user "kubelet"`},
		{name: "getsubids fails", src: subIDSource{lookupUser: found, lookPath: tool, output: out("", "", errors.New("exit status 1"))},
			err: `userns: error retrieving additional ids for user "kubelet": exit status 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.src.kubeletRange(t.Context(), 65536)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	// A failed look-up leaves the Manager not ready; hostUsers: false
	// pods fail with the error, and the next use tries again.
	m := newManager(t, Options{Runtime: supporting("")})
	calls := 0
	m.subIDs = subIDSource{lookupUser: func(string) error {
		calls++
		if calls == 1 {
			return errors.New("nsswitch broken")
		}
		return user.UnknownUserError("kubelet")
	}}
	_, err := m.PodUserNamespace(t.Context(), userPod("a", ptr(false)), "")
	if err == nil || !strings.Contains(err.Error(), "nsswitch broken") {
		t.Fatalf("first use: %v, want the look-up error", err)
	}
	if _, err := m.PodUserNamespace(t.Context(), userPod("a", ptr(false)), ""); err != nil {
		t.Fatalf("second use: %v", err)
	}
}

// TestRunReleasesRemovedPods: once a pod's directory is removed, Run
// frees its block within a CleanupPeriod.
func TestRunReleasesRemovedPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newManager(t, Options{Runtime: supporting(""), Range: &Range{65536, 65536 * 110}})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		// Run's first housekeeping is done before the pods come.
		synctest.Wait()
		for _, uid := range []string{"a", "b"} {
			if _, err := m.PodUserNamespace(ctx, userPod(uid, ptr(false)), ""); err != nil {
				t.Fatal(err)
			}
		}
		free := m.Free()
		if err := os.RemoveAll(filepath.Join(m.opts.RootDir, "pods", "a")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, ok := m.Allocated("a"); !ok {
			t.Fatal("released before a CleanupPeriod passed")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, ok := m.Allocated("a"); ok {
			t.Error("pod a still holds its range after its directory was removed")
		}
		if _, ok := m.Allocated("b"); !ok {
			t.Error("pod b lost its range")
		}
		if got := m.Free(); got != free+1 {
			t.Errorf("free: %d, want %d", got, free+1)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestConcurrentPods gives many pods their mappings at once (run with
// -race): each gets its own block.
func TestConcurrentPods(t *testing.T) {
	m := newManager(t, Options{Runtime: supporting(""), Range: &Range{65536, 65536 * 200}})
	var wg sync.WaitGroup
	got := make([]uint32, 150)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() {
			ns, err := m.PodUserNamespace(t.Context(), userPod(fmt.Sprint("p", i), ptr(false)), "")
			if err != nil {
				errs[i] = err
				return
			}
			got[i] = ns.Uids[0].HostId
		})
	}
	wg.Wait()
	seen := map[uint32]bool{}
	for i, h := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[h] {
			t.Fatalf("host ID %d given twice", h)
		}
		seen[h] = true
	}
}

// TestRunNotReady: a range the kubelet would refuse is logged once, not
// at every period, and the pods fail with the error meanwhile.
func TestRunNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lines []string
		log := funcr.New(func(prefix, args string) {
			mu.Lock()
			lines = append(lines, args)
			mu.Unlock()
		}, funcr.Options{})
		m := newManager(t, Options{Runtime: supporting(""), Range: &Range{65536 + 1, 65536 * 200}, Logger: log})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		_, err := m.PodUserNamespace(ctx, userPod("a", ptr(false)), "")
		if !errors.Is(err, ErrRange) {
			t.Errorf("pod: %v, want ErrRange", err)
		}
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "is not a multiple of 65536") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the range error logged %d times over 5 periods, want once: %q", n, lines)
		}
	})
}

// TestValidatePodClasses: a pod refused for a host namespace and for
// volume devices belongs to both classes; a pod refused for one only to
// that one.
func TestValidatePodClasses(t *testing.T) {
	vd := []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
	both := userPod("a", ptr(false))
	both.Spec.HostPID = true
	both.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: vd}}
	err := ValidatePod(both)
	if !errors.Is(err, ErrHostNamespaces) || !errors.Is(err, ErrVolumeDevices) {
		t.Errorf("host namespace and volume devices: %v, want both classes", err)
	}
	devices := userPod("b", ptr(false))
	devices.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: vd}}
	if err := ValidatePod(devices); !errors.Is(err, ErrVolumeDevices) || errors.Is(err, ErrHostNamespaces) {
		t.Errorf("volume devices: %v, want ErrVolumeDevices alone", err)
	}
	host := userPod("c", ptr(false))
	host.Spec.HostNetwork = true
	if err := ValidatePod(host); !errors.Is(err, ErrHostNamespaces) || errors.Is(err, ErrVolumeDevices) {
		t.Errorf("host network: %v, want ErrHostNamespaces alone", err)
	}
}
