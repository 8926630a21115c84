package nodeapi

import (
	"context"
	"net/http"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the runtime's sandboxes and containers carry (the kubelet's).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

func podList(pods []*v1.Pod) *v1.PodList {
	l := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		l.Items = append(l.Items, *p)
	}
	return l
}

func (h *Handler) pods(w http.ResponseWriter, r *http.Request) {
	h.encode(w, r.URL.Path, podList(h.opts.Pods.Pods()))
}

func (h *Handler) runningPods(w http.ResponseWriter, r *http.Request) {
	pods, err := RunningPods(r.Context(), h.opts.Runtime)
	if err != nil {
		h.log.Error(err, "Cannot list the running pods")
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	h.encode(w, r.URL.Path, podList(pods))
}

// RunningPods lists the pods the runtime runs, as the kubelet's
// /runningpods/ shows them: name, namespace and UID from the sandbox
// labels, and each running container's name and image; sorted by
// namespace and name.
func RunningPods(ctx context.Context, rt Runtime) ([]*v1.Pod, error) {
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, err
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, err
	}
	byUID := map[string]*v1.Pod{}
	var pods []*v1.Pod
	for _, s := range sandboxes {
		uid := s.GetMetadata().GetUid()
		if _, ok := byUID[uid]; ok || uid == "" {
			continue
		}
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name:      s.GetMetadata().GetName(),
			Namespace: s.GetMetadata().GetNamespace(),
			UID:       types.UID(uid),
		}}
		byUID[uid] = p
		pods = append(pods, p)
	}
	for _, c := range containers {
		p, ok := byUID[c.GetLabels()[labelPodUID]]
		if !ok {
			continue
		}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name:  c.GetMetadata().GetName(),
			Image: c.GetImage().GetImage(),
		})
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	return pods, nil
}
