package userns_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/userns"
)

// runtimeWithUserns is a runtime whose default handler supports user
// namespaces, as containerd 2.x with runc >= 1.2 reports it.
type runtimeWithUserns struct{}

func (runtimeWithUserns) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{
		{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
	}}, nil
}

func ExampleNew() {
	root, _ := os.MkdirTemp("", "nodekit")
	defer os.RemoveAll(root)
	m, err := userns.New(userns.Options{
		RootDir: root,
		Runtime: runtimeWithUserns{},
		// The node's range; by default the "kubelet" user's subordinate
		// IDs, else every ID from 65536 up.
		Range: &userns.Range{First: 1 << 20, Length: 1 << 30},
	})
	if err != nil {
		panic(err)
	}
	hostUsers := false
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "7c1f"}, Spec: v1.PodSpec{HostUsers: &hostUsers}}
	ns, err := m.PodUserNamespace(context.Background(), pod, "")
	if err != nil {
		panic(err)
	}
	u := ns.Uids[0]
	fmt.Println(ns.Mode, u.ContainerId, u.Length, u.HostId >= 1<<20 && u.HostId%65536 == 0)
	// Output: POD 0 65536 true
}
