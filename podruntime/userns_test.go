package podruntime

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/userns"
)

type usernsStatus struct{ supported bool }

func (s usernsStatus) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{
		{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: s.supported}},
	}}, nil
}

// TestUserNamespaceOptions: the sandbox and every container of a pod get
// its user namespace in their namespace options, as the kubelet sends
// them: mode POD with the pod's mappings for hostUsers: false, mode NODE
// otherwise; a runtime without support fails the sandbox with the
// kubelet's message.
func TestUserNamespaceOptions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hostUsers *bool
		supported bool
		mode      runtimeapi.NamespaceMode
		err       string
	}{
		{name: "hostUsers unset", mode: runtimeapi.NamespaceMode_NODE},
		{name: "hostUsers true", hostUsers: ptr(true), mode: runtimeapi.NamespaceMode_NODE},
		{name: "hostUsers false", hostUsers: ptr(false), supported: true, mode: runtimeapi.NamespaceMode_POD},
		{name: "hostUsers false, no runtime support", hostUsers: ptr(false),
			err: "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			um, err := userns.New(userns.Options{RootDir: t.TempDir(), Runtime: usernsStatus{tc.supported}})
			if err != nil {
				t.Fatal(err)
			}
			rec := record.NewFakeRecorder(10)
			f := newFakes(t, Options{UserNamespaces: um, Recorder: rec, RootDir: t.TempDir()})
			pod := testPod("userns", "a", "b")
			pod.Spec.HostUsers = tc.hostUsers
			res := f.sync(t, pod)
			if tc.err != "" {
				if err := res.Err(); !errors.Is(err, ErrCreatePodSandbox) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("sync: %v, want CreatePodSandboxError %q", err, tc.err)
				}
				if ev := <-rec.Events; ev != "Warning FailedCreatePodSandBox Failed to create pod sandbox: "+tc.err {
					t.Errorf("event %q", ev)
				}
				if len(f.rec.sandboxConfigs) != 0 {
					t.Errorf("RunPodSandbox called %d times, want none", len(f.rec.sandboxConfigs))
				}
				return
			}
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
			got := []*runtimeapi.UserNamespace{f.rec.sandboxConfigs[0].GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()}
			for _, c := range []string{"a", "b"} {
				got = append(got, f.rec.lastContainerConfig(c).GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions())
			}
			for i, ns := range got {
				if ns.GetMode() != tc.mode {
					t.Errorf("config %d: mode %v, want %v", i, ns.GetMode(), tc.mode)
				}
			}
			// The containers' mounts are idmapped with the pod's mappings
			// (none in mode NODE), as the kubelet's.
			for _, c := range []string{"a", "b"} {
				mounts := f.rec.lastContainerConfig(c).GetMounts()
				if len(mounts) == 0 {
					t.Fatalf("container %s: no mounts", c)
				}
				ns := f.rec.lastContainerConfig(c).GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
				for _, mt := range mounts {
					if !cmp.Equal(ns.GetUids(), mt.GetUidMappings(), protocmp.Transform()) || !cmp.Equal(ns.GetGids(), mt.GetGidMappings(), protocmp.Transform()) {
						t.Errorf("container %s: mount %s mappings %v %v, want the pod's %v %v", c, mt.GetContainerPath(), mt.GetUidMappings(), mt.GetGidMappings(), ns.GetUids(), ns.GetGids())
					}
				}
			}
			if tc.mode != runtimeapi.NamespaceMode_POD {
				return
			}
			mp, ok := um.Allocated(pod.UID)
			if !ok {
				t.Fatal("no mapping allocated")
			}
			for i, ns := range got {
				if len(ns.Uids) != 1 || len(ns.Gids) != 1 || ns.Uids[0].HostId != mp.HostID || ns.Gids[0].HostId != mp.HostID ||
					ns.Uids[0].ContainerId != 0 || ns.Uids[0].Length != 65536 {
					t.Errorf("config %d: mappings %v, want 0 -> %d (65536)", i, ns, mp.HostID)
				}
			}
		})
	}
}
