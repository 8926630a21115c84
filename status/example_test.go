package status_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/status"
)

// A manager without a client holds the statuses and tells its observer of
// each change; with Options.Client, Run also writes them to the API server.
func ExampleNewManager() {
	m := status.NewManager(status.Options{
		Observer: func(pod *v1.Pod, s v1.PodStatus) { fmt.Println(pod.Name, s.Phase) },
	})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}}
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning})
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning}) // unchanged: not reported
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodSucceeded})
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning}) // a terminal phase is final
	s, _ := m.GetPodStatus("u1")
	fmt.Println("held:", s.Phase, "version", m.Version("u1"))
	// Output:
	// web Running
	// web Succeeded
	// held: Succeeded version 2
}
